"""keras.utils.np_utils of Keras 2 (`from keras.utils import np_utils; np_utils.to_categorical(y)`)."""
from actorflow.keras.utils import normalize, to_categorical

__all__ = ["to_categorical", "normalize"]
