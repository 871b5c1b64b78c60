"""`tensorflow.python.summary`: summaries and the FileWriter."""
