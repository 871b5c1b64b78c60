"""One notebook of ageron/handson-ml (the book's first edition, TF 1.x), run top to bottom as a user
runs it: NOTEBOOK below names it (the corpus entry's patch sets it), and `files` brings the .ipynb,
which the harness writes as `<NOTEBOOK>.py`, the notebook's code cells in order (compat.py
`notebook_script`: magics and shell lines inert), ported as every program is.

The driver runs that script cell by cell in one namespace, with
  - the training shortened, the same for both libraries: every `n_epochs = N` (and `n_epochs=N`
    argument; n_iterations, num_steps likewise) is capped at the notebook's CAPS, and the notebook's own EDITS replacements apply
    (each must apply, or the driver stops): shorter training, and what scikit-learn 1.x asks of
    calls written for 0.2x (Perceptron's `tol=-inf` is `tol=None` now, TSNE's `n_iter` is `max_iter`);
  - /tmp paths pointed into the run's own directory (a checkpoint left in /tmp by one run would be
    resumed by the next: the notebooks' "resume from checkpoint" cells look for it);
  - the downloads replaced by generated stand-ins, identical for both libraries: MNIST
    (`tf.keras.datasets.mnist.load_data` and `tensorflow.examples.tutorials.mnist`) from the digits
    stand-in (shims/input_data.py) as uint8 28x28 images, text8 (chapter 14's word2vec) from
    shims/text8.py, California housing
    (`sklearn.datasets.fetch_california_housing`) as a generated regression set of the same columns;
  - SKIP: cells that need a download with no reasonable stand-in, skipped with the reason printed;
    TF_LACKS: cells that use what TensorFlow 2.21 no longer has (tf.estimator, contrib's
    legacy_seq2seq), skipped on TensorFlow's side only, with the reason printed; the figure is read
    from a cell both sides run.
TensorFlow 2.21's side gets the `tf.contrib.layers` names these notebooks call (regularizers,
variance_scaling_initializer) from tf_slim, contrib.layers' code. Figures are drawn with matplotlib's
Agg backend (no display) and closed after each cell.
"""
import os
import re
import types

import matplotlib
import numpy as np
import sklearn.datasets
import tensorflow as tf

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NOTEBOOK = "09_up_and_running_with_tensorflow"
LIB = os.environ.get("AF_COMPAT_LIB", "actorflow")

# {notebook: {name: cap}}: `name = N` and `name=N` become min(N, cap)
CAPS = {
    "09_up_and_running_with_tensorflow": {"n_epochs": 100},
    "10_introduction_to_artificial_neural_networks": {"n_epochs": 3},
    "11_deep_learning": {"n_epochs": 2},
    "14_recurrent_neural_networks": {"n_epochs": 2, "n_iterations": 200, "num_steps": 1001},
    "15_autoencoders": {"n_epochs": 2},
}
EDITS = {
    "09_up_and_running_with_tensorflow": [],
    "10_introduction_to_artificial_neural_networks": [("num_epochs=40", "num_epochs=3"),
                                                      ("tol=-np.inf,", "tol=None,")],
    "11_deep_learning": [("n_iter=50", "n_iter=2")],      # the three randomized searches: 2 draws, not 50
    "14_recurrent_neural_networks": [("n_iter=5000)", "max_iter=250)")],    # TSNE's n_iter is max_iter now
    "15_autoencoders": [("n_labeled_instances = 20000", "n_labeled_instances = 2000")],  # the stand-in has 7,400
}
# {notebook: {cell index: (text the cell holds, why it is skipped)}}
SKIP = {}
TF_LACKS = {
    "14_recurrent_neural_networks": {
        161: ("tf.contrib.legacy_seq2seq.embedding_rnn_seq2seq", "contrib.legacy_seq2seq is gone from TensorFlow 2.21"),
        162: ("logits_flat = tf.reshape(logits", "builds on the legacy_seq2seq model of In[161]"),
    },
    "10_introduction_to_artificial_neural_networks": {
        21: ("tf.estimator.DNNClassifier", "tf.estimator is gone from TensorFlow 2.21"),
        22: ("dnn_clf.evaluate", "tf.estimator is gone from TensorFlow 2.21"),
        23: ("eval_results", "tf.estimator is gone from TensorFlow 2.21"),
        24: ("dnn_clf.predict", "tf.estimator is gone from TensorFlow 2.21"),
    },
}


def mnist_standin(path="mnist.npz"):
    """keras.datasets.mnist.load_data's arrays from the digits stand-in: uint8 28x28 images."""
    import input_data

    sets = input_data.read_data_sets("unused", reshape=False, validation_size=0)

    def form(ds):
        return np.round(ds.images[..., 0] * 255).astype(np.uint8), ds.labels.astype(np.uint8)

    return form(sets.train), form(sets.test)


def california_housing_standin(data_home=None, download_if_missing=True, return_X_y=False, as_frame=False):
    """fetch_california_housing's Bunch: 2,064 districts with the dataset's eight columns, at their
    scales, and a median house value (in $100,000s, clipped to [0.15, 5]) that depends on them."""
    rng = np.random.RandomState(42)
    m = 2064
    inc = rng.lognormal(1.3, 0.45, m)
    age = rng.randint(1, 53, m).astype(np.float64)
    rooms = rng.normal(5.4, 1.2, m).clip(1.5)
    bedrms = (rooms * rng.normal(0.2, 0.02, m)).clip(0.5)
    pop = rng.lognormal(7.0, 0.7, m)
    occup = rng.normal(3.0, 0.6, m).clip(1.0)
    lat = rng.uniform(32.5, 42.0, m)
    lon = -124.3 + (42.0 - lat) * 0.9 + rng.normal(0, 0.8, m)
    target = (0.45 * inc + 0.01 * age + 0.1 * (rooms - bedrms * 4) - 0.05 * occup - 0.4 * (lat - 36)
              - 0.4 * (lon + 120) + rng.normal(0, 0.5, m) - 0.5).clip(0.15, 5.0)
    data = np.c_[inc, age, rooms, bedrms, pop, occup, lat, lon]
    if return_X_y:
        return data, target
    names = ["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude", "Longitude"]
    return sklearn.datasets._base.Bunch(data=data, target=target, feature_names=names,
                                        target_names=["MedHouseVal"], DESCR="generated stand-in")


tf.keras.datasets.mnist.load_data = mnist_standin
sklearn.datasets.fetch_california_housing = california_housing_standin
if NOTEBOOK == "14_recurrent_neural_networks":     # text8, which fetch_words_data reads if it is there
    from text8 import make_text8_zip

    os.makedirs("datasets/words", exist_ok=True)
    make_text8_zip("datasets/words/words.zip", vocab=50100, every_word=True)
if LIB != "actorflow":      # TF 2.21 has no contrib: contrib.layers' names from tf_slim, its code
    import compat_contrib

    slim = compat_contrib.tf_slim_on_tf_2_21()

    class _Layers(types.ModuleType):
        def __getattr__(self, name):
            for space in (slim, slim.layers):
                if hasattr(space, name):
                    return getattr(space, name)
            raise AttributeError(f"contrib.layers.{name} has no counterpart in tf_slim")

    tf.contrib = types.SimpleNamespace(layers=_Layers("layers"), rnn=compat_contrib.rnn)


def cells(script):
    """[(cell index, source)] of a notebook script (its `# In[k]:` markers)."""
    parts = re.split(r"^# In\[(\d+)\]:\n", script, flags=re.M)
    return [(int(k), src) for k, src in zip(parts[1::2], parts[2::2])]


def shorten(src):
    for name, cap in CAPS.get(NOTEBOOK, {}).items():
        src = re.sub(rf"\b({name}\s*=\s*)(\d+)\b", lambda m, cap=cap: m.group(1) + str(min(int(m.group(2)), cap)), src)
    src = re.sub(r"([\"'])/tmp/", r"\1./", src)
    for old, new in EDITS.get(NOTEBOOK, []):
        if old not in src:
            raise ValueError(f"{NOTEBOOK}: shortening {old!r} does not apply")
        src = src.replace(old, new)
    return src


def main():
    with open(NOTEBOOK + ".py") as f:
        script = shorten(f.read())
    skip = dict(SKIP.get(NOTEBOOK, {}))
    if LIB != "actorflow":
        skip.update(TF_LACKS.get(NOTEBOOK, {}))
    namespace = {"__name__": "__main__"}
    for k, src in cells(script):
        if k in skip:
            text, why = skip[k]
            if text not in src:
                raise ValueError(f"{NOTEBOOK}: cell In[{k}] does not hold {text!r}: the skip list is stale")
            print(f"[driver] skipping cell In[{k}]: {why}")
            continue
        exec(compile(src, f"{NOTEBOOK}.ipynb In[{k}]", "exec"), namespace)
        plt.close("all")


main()
