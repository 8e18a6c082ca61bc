# mypy: ignore-errors
# The float64 numpy reference of the verify CNN, for backends whose framework has no float64 CPU path
# of its own (PlaidML/Keras). numpy is handed in by the caller (the framework's own numpy), so this
# file imports nothing. Python 3.7 compatible (see __main__.py).


def np_cnn_loss_grads(np, weights, x, y, clip=1e-7):
    """Float64 reference of the Keras-MNIST CNN without dropout: NHWC, kernels HWIO, dense (in, out),
    softmax + categorical cross-entropy (Keras clips probabilities to [clip, 1 - clip]).
    Returns (loss, [grad per weight])."""
    k1, b1, k2, b2, w3, b3, w4, b4 = [np.asarray(w, dtype=np.float64) for w in weights]
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]

    def conv(inp, k):
        kh, kw, _, co = k.shape
        oh, ow = inp.shape[1] - kh + 1, inp.shape[2] - kw + 1
        out = np.zeros((inp.shape[0], oh, ow, co))
        for i in range(kh):
            for j in range(kw):
                out += inp[:, i:i + oh, j:j + ow, :].dot(k[i, j])
        return out

    def conv_back(inp, k, dout):
        kh, kw = k.shape[0], k.shape[1]
        oh, ow = dout.shape[1], dout.shape[2]
        dk = np.zeros_like(k)
        dx = np.zeros_like(inp)
        for i in range(kh):
            for j in range(kw):
                sl = inp[:, i:i + oh, j:j + ow, :]
                dk[i, j] = np.tensordot(sl, dout, axes=([0, 1, 2], [0, 1, 2]))
                dx[:, i:i + oh, j:j + ow, :] += dout.dot(k[i, j].T)
        return dx, dk

    z1 = conv(x, k1) + b1
    a1 = np.maximum(z1, 0)
    z2 = conv(a1, k2) + b2
    a2 = np.maximum(z2, 0)
    _, h, w, c = a2.shape
    a2r = a2.reshape(n, h // 2, 2, w // 2, 2, c)
    pooled = a2r.max(axis=(2, 4))
    mask = (a2r == pooled[:, :, None, :, None, :])
    f = pooled.reshape(n, -1)
    z3 = f.dot(w3) + b3
    a3 = np.maximum(z3, 0)
    logits = a3.dot(w4) + b4
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    onehot = np.zeros_like(prob)
    onehot[np.arange(n), y] = 1.0
    loss = float(np.mean(-np.log(np.clip(prob[np.arange(n), y], clip, 1 - clip))))
    dl = (prob - onehot) / n
    dw4 = a3.T.dot(dl)
    db4 = dl.sum(axis=0)
    dz3 = dl.dot(w4.T) * (z3 > 0)
    dw3 = f.T.dot(dz3)
    db3 = dz3.sum(axis=0)
    dp = dz3.dot(w3.T).reshape(pooled.shape)
    da2 = (mask * dp[:, :, None, :, None, :]).reshape(a2.shape)
    dz2 = da2 * (z2 > 0)
    db2 = dz2.sum(axis=(0, 1, 2))
    da1, dk2 = conv_back(a1, k2, dz2)
    dz1 = da1 * (z1 > 0)
    db1 = dz1.sum(axis=(0, 1, 2))
    _, dk1 = conv_back(x, k1, dz1)
    return loss, [dk1, db1, dk2, db2, dw3, db3, dw4, db4]
