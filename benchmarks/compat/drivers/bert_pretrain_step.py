"""BERT's pretraining model and optimizer, step for step (corpus driver: google-research/bert).

Builds BERT (modeling.BertModel, a small config) with run_pretraining's masked-LM and next-sentence
heads, and BERT's AdamWeightDecayOptimizer with clip_by_global_norm as optimization.create_optimizer
does, at a constant learning rate (create_optimizer's schedule reads the global step that its own
train_op increments, an unordered read TensorFlow's executor resolves either way from run to run);
trains 30 steps with dropout on a fixed batch and prints each loss. Under a graph seed both libraries
draw the same initial weights and dropout masks (actorflow's random ops are TF's Philox streams), so
run k gives the same losses under both.

BERT's modeling.py calls tf.contrib.layers.layer_norm; TensorFlow 2.21 has no contrib, so its side
gets TF 1.15's layer_norm from shims/compat_contrib.py. actorflow runs its own af.contrib.layers.layer_norm.
"""
import numpy as np
import tensorflow as tf
from compat_contrib import add_layer_norm

add_layer_norm(tf)          # TensorFlow 2.21: tf.contrib.layers.layer_norm as TF 1.15 had it
import modeling  # noqa: E402
import optimization  # noqa: E402
import run_pretraining  # noqa: E402

tf.set_random_seed(1234)
rng = np.random.RandomState(0)
B, S, P, V = 4, 16, 3, 50
cfg = modeling.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=64, max_position_embeddings=32, type_vocab_size=2)
ids = tf.placeholder(tf.int32, [B, S])
mask = tf.placeholder(tf.int32, [B, S])
seg = tf.placeholder(tf.int32, [B, S])
pos = tf.placeholder(tf.int32, [B, P])
lab = tf.placeholder(tf.int32, [B, P])
w = tf.placeholder(tf.float32, [B, P])
nsl = tf.placeholder(tf.int32, [B])
model = modeling.BertModel(config=cfg, is_training=True, input_ids=ids, input_mask=mask, token_type_ids=seg,
                           use_one_hot_embeddings=False)
mlm_loss, _, _ = run_pretraining.get_masked_lm_output(cfg, model.get_sequence_output(), model.get_embedding_table(),
                                                      pos, lab, w)
ns_loss, _, _ = run_pretraining.get_next_sentence_output(cfg, model.get_pooled_output(), nsl)
loss = mlm_loss + ns_loss
tvars = tf.trainable_variables()
grads, _ = tf.clip_by_global_norm(tf.gradients(loss, tvars), clip_norm=1.0)
train_op = optimization.AdamWeightDecayOptimizer(
    learning_rate=1e-3, weight_decay_rate=0.01, epsilon=1e-6,
    exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"]).apply_gradients(zip(grads, tvars))
feed = {ids: rng.randint(0, V, (B, S)),
        mask: (np.arange(S)[None] < rng.randint(8, S + 1, (B, 1))).astype(np.int32),
        seg: np.broadcast_to((np.arange(S) >= 8).astype(np.int32), (B, S)),
        pos: np.sort(rng.choice(8, (B, P))), lab: rng.randint(0, V, (B, P)), w: np.ones((B, P), np.float32),
        nsl: rng.randint(0, 2, B)}
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step in range(30):
        value, _ = sess.run([loss, train_op], feed)
        print(f"step {step} loss {value:.6f}")
print(f"final loss {value:.6f}")
