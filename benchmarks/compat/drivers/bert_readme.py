"""BERT's README workflow, its scripts run as the README runs them (corpus driver: google-research/bert).

create_pretraining_data.py on the repository's sample_text.txt, run_pretraining.py (train, then
evaluate, through TPUEstimator with use_tpu=False), then from that checkpoint run_classifier.py
(CoLA: train, evaluate, predict), extract_features.py and run_squad.py (train, predict). BERT's
published vocabulary and checkpoints are downloads, so the vocabulary is built from sample_text.txt
with BERT's own BasicTokenizer (its words seen twice, its characters, and their '##' pieces), the model
is small (2 layers of 64), the CoLA and SQuAD files are made from sample_text's lines, and the runs
are a few steps each. Prints each script's figures and, last, the pretraining's masked-LM accuracy.

TensorFlow 2.21 has neither tf.contrib.tpu nor tf.estimator: its side stops at run_pretraining.py.
"""
import json
import os
import random
import re
import subprocess
import sys

import tensorflow as tf
import tokenization

assert tf  # the library under test, imported as the scripts import it (each script runs in its own process)

HERE = os.getcwd()


def run(script, **flags):
    args = [sys.executable, script] + [f"--{k}={v}" for k, v in flags.items()]
    r = subprocess.run(args, cwd=HERE, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-6000:])
        raise SystemExit(f"{script} failed ({r.returncode})")
    return r.stdout + r.stderr


def results(text, names):
    found = {}
    for name in names:
        m = re.findall(rf"\b{name} = ([-\d.e]+)", text)
        if m:
            found[name] = float(m[-1])
    return found


lines = [line.strip() for line in open("sample_text.txt", encoding="utf-8") if line.strip()]
basic = tokenization.BasicTokenizer(do_lower_case=True)
counts = {}
for line in lines:
    for word in basic.tokenize(line):
        counts[word] = counts.get(word, 0) + 1
words = sorted((w for w, n in counts.items() if n >= 2), key=lambda w: (-counts[w], w))
chars = sorted({c for w in counts for c in w})
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + [c for c in chars if c not in words] \
    + ["##" + c for c in chars]
with open("vocab.txt", "w", encoding="utf-8") as f:
    f.write("\n".join(vocab) + "\n")
with open("bert_config.json", "w") as f:
    json.dump({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
               "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
               "max_position_embeddings": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
               "type_vocab_size": 2, "vocab_size": len(vocab)}, f)
common = {"vocab_file": "vocab.txt", "bert_config_file": "bert_config.json"}

run("create_pretraining_data.py", input_file="sample_text.txt", output_file="tf_examples.tfrecord",
    vocab_file="vocab.txt", do_lower_case=True, max_seq_length=64, max_predictions_per_seq=10,
    masked_lm_prob=0.15, random_seed=12345, dupe_factor=2)
out = run("run_pretraining.py", input_file="tf_examples.tfrecord", output_dir="pretraining_output", do_train=True,
          do_eval=True, bert_config_file="bert_config.json", train_batch_size=8, max_seq_length=64,
          max_predictions_per_seq=10, num_train_steps=40, num_warmup_steps=5, learning_rate=1e-3,
          max_eval_steps=5, eval_batch_size=8, save_checkpoints_steps=20)
pretraining = results(out, ["masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "global_step"])
print("run_pretraining:", pretraining)
ckpt = "pretraining_output/model.ckpt-40"

rnd = random.Random(0)
os.makedirs("cola", exist_ok=True)
for split, n in (("train", 64), ("dev", 24)):
    with open(f"cola/{split}.tsv", "w", encoding="utf-8") as f:
        for i in range(n):
            s = rnd.choice(lines)
            f.write(f"src{i}\t{int('the' in s.lower().split()[:6])}\t\t{s}\n")
with open("cola/test.tsv", "w", encoding="utf-8") as f:
    f.write("index\tsentence\n" + "".join(f"{i}\t{rnd.choice(lines)}\n" for i in range(10)))
out = run("run_classifier.py", task_name="cola", do_train=True, do_eval=True, do_predict=True, data_dir="cola",
          init_checkpoint=ckpt, max_seq_length=32, train_batch_size=8, learning_rate=1e-3, num_train_epochs=2.0,
          output_dir="cola_output", **common)
print("run_classifier:", results(out, ["eval_accuracy", "eval_loss"]),
      "test rows:", sum(1 for _ in open("cola_output/test_results.tsv")))

with open("features_in.txt", "w", encoding="utf-8") as f:
    f.write("".join(f"{line} ||| {rnd.choice(lines)}\n" for line in lines[:5]))
run("extract_features.py", input_file="features_in.txt", output_file="features.jsonl", init_checkpoint=ckpt,
    layers="-1,-2", max_seq_length=64, batch_size=4, **common)
features = [json.loads(line) for line in open("features.jsonl")]
print("extract_features: lines", len(features), "width", len(features[0]["features"][0]["layers"][0]["values"]))

data = []
for i, p in enumerate(line for line in lines if len(line.split()) > 12):
    w = p.split()
    s = rnd.randint(3, len(w) - 3)
    answer = " ".join(w[s:s + 2])
    data.append({"title": f"t{i}", "paragraphs": [{"context": p, "qas": [{
        "id": f"q{i}", "question": "what is " + " ".join(w[s - 3:s]) + "?",
        "answers": [{"text": answer, "answer_start": p.index(answer)}]}]}]})
with open("squad.json", "w") as f:
    json.dump({"version": "1.1", "data": data[:12]}, f)
run("run_squad.py", init_checkpoint=ckpt, do_train=True, train_file="squad.json", do_predict=True,
    predict_file="squad.json", train_batch_size=4, learning_rate=1e-3, num_train_epochs=2.0, max_seq_length=64,
    max_query_length=16, doc_stride=32, output_dir="squad_output", **common)
predictions = json.load(open("squad_output/predictions.json"))
print("run_squad: predictions", len(predictions))
print(f"masked_lm_accuracy {pretraining['masked_lm_accuracy']:.4f}")
