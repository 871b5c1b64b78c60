"""`tensorflow.python.client`: sessions, timelines and the local device list."""
