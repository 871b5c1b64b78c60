"""Train a small Keras convnet on scikit-learn's handwritten digits with af.keras.

The TF-1.x `tf.keras` style, ported by the import swap: a Sequential model of Conv2D, MaxPooling2D,
BatchNormalization, Dropout and Dense layers, compiled with Adam and sparse categorical
cross-entropy, trained with `fit` (a validation split, EarlyStopping) and evaluated at the end; the
test accuracy is printed (about 98%).

    python examples/keras_digits.py [--epochs 15] [--batch-size 32] [--seed 0] [--quiet]
"""
from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import actorflow as af
from actorflow import keras

L = keras.layers


def load_data(seed: int):
    """Digits as [n, 8, 8, 1] float32 images in [0, 1] and int labels, split 80/20, stratified."""
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]
    return train_test_split(x, digits.target, test_size=0.2, stratify=digits.target, random_state=seed)


def build_model():
    """The Keras model, compiled."""
    model = keras.Sequential([
        L.Conv2D(32, 3, padding="same", activation="relu", input_shape=(8, 8, 1)),
        L.BatchNormalization(),
        L.MaxPooling2D(),
        L.Conv2D(64, 3, padding="same", activation="relu"),
        L.GlobalAveragePooling2D(),
        L.Dropout(0.2),
        L.Dense(10, activation="softmax"),
    ])
    model.compile(keras.optimizers.Adam(lr=0.01), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    keras.backend.clear_session()
    af.set_random_seed(args.seed)
    np.random.seed(args.seed)
    x_train, x_test, y_train, y_test = load_data(args.seed)
    model = build_model()
    if not args.quiet:
        model.summary()
    stop = keras.callbacks.EarlyStopping(monitor="val_acc", patience=3, restore_best_weights=True)
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.1,
              callbacks=[stop], verbose=0 if args.quiet else 2)
    _, acc = model.evaluate(x_test, y_test, verbose=0)
    print(f"test accuracy: {acc:.4f}")
    return acc


if __name__ == "__main__":
    main()
