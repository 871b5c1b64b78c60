"""Loop bodies shared by the loop-JIT tests."""
import actorflow as af


def lstm_body(x, w, b):
    """The while_loop body (t, h, c) -> (t + 1, h, c) of an LSTM cell over input x, weights w
    [2W, 4W] and bias b [4W]."""
    def body(t, h, c):
        z = af.nn.bias_add(af.matmul(af.concat([x, h], 1), w), b)
        i, j, f, o = af.split(z, 4, axis=1)
        c = c * af.sigmoid(f + 1.0) + af.sigmoid(i) * af.tanh(j)
        h = af.tanh(c) * af.sigmoid(o)
        return t + 1, h, c
    return body
