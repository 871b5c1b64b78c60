"""OpenAI's GPT-2 sampler (corpus driver: openai/gpt-2's src/model.py and src/sample.py).

The published weights are a download, so the model is small (2 layers of 32, 4 heads, 64 tokens) with
the initial weights its initializers draw under a graph seed: the same numbers in both libraries
(actorflow's random ops are TF's Philox streams). Prints the logits of a context, then three samples of
10 tokens from sample_sequence (a while_loop carrying the attention's past keys and values with
unknown-length shape invariants, top-k and nucleus filtering, tf.multinomial), and a checksum of the
samples: run k of actorflow must draw run k of TF's tokens. Batch 1: the repository's top_p_logits does
not broadcast over larger batches, in either library.
"""
import model
import numpy as np
import sample
import tensorflow as tf

hparams = model.default_hparams()
hparams.override_from_dict(dict(n_vocab=64, n_ctx=32, n_embd=32, n_head=4, n_layer=2))
tf.set_random_seed(7)
context = tf.placeholder(tf.int32, [1, None])
out = sample.sample_sequence(hparams=hparams, length=10, context=context, batch_size=1, temperature=1, top_k=5,
                             top_p=0.9)
logits = model.model(hparams, X=context, reuse=tf.AUTO_REUSE)["logits"]
ctx = np.random.randint(0, 64, (1, 5))
checksum = 0
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    lg = sess.run(logits, {context: ctx})
    print("logits |sum|", float(np.abs(lg).sum()), lg[0, -1, :4])
    for i in range(3):
        tokens = sess.run(out, {context: ctx})[0, 5:]
        print("sample", tokens.tolist())
        checksum += int(np.dot(tokens, np.arange(1, 11))) * (i + 1)
print(f"sample checksum {checksum}")
