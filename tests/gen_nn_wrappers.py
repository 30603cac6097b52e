"""PyTorch 1.13's values for the nn modules that call nn.functional's rules
(tests/lua/nn_wrappers_spec.lua): tests/fixtures/nn_wrappers.lua.

    /usr/bin/python3 tests/gen_nn_wrappers.py

A pad case is torch's padding module (`torch`, its constructor's text) on a
float64 input x: the output, the gradient of sum(out * w) for x, and
str(module). ZeroPad1d and ZeroPad3d are PyTorch 2.1's (1.13 has only
ZeroPad2d): their values are ConstantPad1d/3d's with value 0, and their
repr the padding alone, as 2.1 prints them. `containers` holds a module with
a ParameterList and a ParameterDict: its state dict (torch's names, in
order), the output of a forward that uses every parameter, and each
parameter's gradient. `pools3d`: MaxPool3d with return_indices and MaxUnpool3d (see
pool3d_case); `convt3d`: ConvTranspose3d (see convt3d_case); `mlml`: MultiLabelMarginLoss (mlml_case); `fractional`:
FractionalMaxPool2d/3d with given samples (fractional_case); `asm`: AdaptiveLogSoftmaxWithLoss (asm).
"""
import torch
import torch.nn as tnn

from fixture_writer import Writer

SEED = 2718
torch.manual_seed(SEED)


def pad_case(name, ctor, mod, shape, repr_=None):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    out = mod(x)
    w = torch.randn(out.shape, dtype=torch.float64)
    (out * w).sum().backward()
    return {"name": name, "ctor": ctor, "x": x, "w": w, "out": out, "grad_x": x.grad,
            "repr": repr_ or str(mod)}


def pads():
    return [
        pad_case("ConstantPad3d", "nn.ConstantPad3d({1, 0, 2, 1, 0, 3}, 0.5)",
                 tnn.ConstantPad3d((1, 0, 2, 1, 0, 3), 0.5), (2, 2, 3, 4, 4)),
        pad_case("ConstantPad3d_crop", "nn.ConstantPad3d({-1, 2, 1, -1, 1, 0}, -2.0)",
                 tnn.ConstantPad3d((-1, 2, 1, -1, 1, 0), -2.0), (2, 3, 4, 4)),
        pad_case("ReflectionPad3d", "nn.ReflectionPad3d({1, 2, 0, 1, 2, 1})",
                 tnn.ReflectionPad3d((1, 2, 0, 1, 2, 1)), (2, 2, 3, 4, 4)),
        pad_case("ReflectionPad3d_unbatched", "nn.ReflectionPad3d(1)", tnn.ReflectionPad3d(1), (2, 3, 3, 3)),
        pad_case("ReplicationPad3d", "nn.ReplicationPad3d({2, 0, 1, 1, 0, 3})",
                 tnn.ReplicationPad3d((2, 0, 1, 1, 0, 3)), (2, 2, 3, 4, 4)),
        pad_case("ReplicationPad3d_unbatched", "nn.ReplicationPad3d(2)", tnn.ReplicationPad3d(2), (2, 2, 3, 2)),
        pad_case("ZeroPad1d", "nn.ZeroPad1d({2, 1})", tnn.ConstantPad1d((2, 1), 0.0), (2, 3, 4), "ZeroPad1d((2, 1))"),
        pad_case("ZeroPad3d", "nn.ZeroPad3d(1)", tnn.ConstantPad3d(1, 0.0), (1, 2, 2, 3, 2),
                 "ZeroPad3d((1, 1, 1, 1, 1, 1))"),
    ]


class Holder(tnn.Module):
    def __init__(self):
        super().__init__()
        self.gains = tnn.ParameterList([tnn.Parameter(torch.randn(4, dtype=torch.float64)) for _ in range(3)])
        self.heads = tnn.ParameterDict({"text": tnn.Parameter(torch.randn(4, 2, dtype=torch.float64)),
                                        "image": tnn.Parameter(torch.randn(4, 2, dtype=torch.float64))})

    def forward(self, x):
        for g in self.gains:
            x = x * g
        return x @ self.heads["image"] + (x * x) @ self.heads["text"]


def containers():
    m = Holder()
    x = torch.randn(3, 4, dtype=torch.float64)
    out = m(x)
    out.sum().backward()
    names = list(m.state_dict().keys())
    return {"names": names, "state": [m.state_dict()[n] for n in names], "x": x, "out": out,
            "grads": [dict(m.named_parameters())[n].grad for n in names]}


def pool3d_case(name, ctor, kernel, stride, padding, dilation, shape, unpool=None):
    """torch's MaxPool3d with return_indices (indices written +1: ember's are 1-based), the
    gradient of sum(y * w) for x, and where `unpool` names ember's MaxUnpool3d, torch's on
    (y, indices) with the input's size: its output and the gradient of sum(u * wu) for y."""
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    pool = tnn.MaxPool3d(kernel, stride, padding, dilation, return_indices=True)
    y, idx = pool(x)
    w = torch.randn(y.shape, dtype=torch.float64)
    (y * w).sum().backward()
    c = {"name": name, "ctor": ctor, "x": x, "w": w, "out": y, "indices": idx + 1, "grad_x": x.grad}
    if unpool:
        yl = y.detach().requires_grad_(True)
        u = tnn.MaxUnpool3d(kernel, stride, padding)(yl, idx, output_size=shape[-3:])
        wu = torch.randn(u.shape, dtype=torch.float64)
        (u * wu).sum().backward()
        c.update({"unpool": unpool, "wu": wu, "unpooled": u, "grad_y": yl.grad})
    return c


def pools3d():
    return [
        pool3d_case("MaxPool3d_unpool", "nn.MaxPool3d(2, {return_indices = true})", 2, 2, 0, 1, (2, 3, 4, 4, 6),
                    "nn.MaxUnpool3d(2)"),
        pool3d_case("MaxPool3d_padded_unpool", "nn.MaxPool3d({2, 2, 3}, {stride = {2, 2, 3}, padding = 1, return_indices = true})",
                    (2, 2, 3), (2, 2, 3), 1, 1, (1, 2, 5, 4, 7), "nn.MaxUnpool3d({2, 2, 3}, {stride = {2, 2, 3}, padding = 1})"),
        pool3d_case("MaxPool3d_overlap", "nn.MaxPool3d({3, 2, 2}, {stride = {1, 2, 1}, dilation = {2, 1, 2}, return_indices = true})",
                    (3, 2, 2), (1, 2, 1), 0, (2, 1, 2), (2, 2, 7, 4, 5)),
        pool3d_case("MaxPool3d_unbatched_unpool", "nn.MaxPool3d(2, {stride = 2, return_indices = true})", 2, 2, 0, 1,
                    (3, 4, 2, 4), "nn.MaxUnpool3d(2, {stride = 2})"),
    ]


def convt3d_case(name, ctor, mod, shape, output_size=None):
    """torch's ConvTranspose3d (float64, its own init's values as the state): the output of
    forward(x [, output_size]), the gradients of sum(out * w) for x, weight and bias, str(module)."""
    mod = mod.double()
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    out = mod(x, output_size=output_size) if output_size else mod(x)
    w = torch.randn(out.shape, dtype=torch.float64)
    (out * w).sum().backward()
    c = {"name": name, "ctor": ctor, "x": x, "w": w, "out": out, "grad_x": x.grad, "repr": str(mod),
         "weight": mod.weight, "grad_weight": mod.weight.grad, "output_size": list(output_size) if output_size else None}
    if mod.bias is not None:
        c.update({"bias": mod.bias, "grad_bias": mod.bias.grad})
    return c


def convt3d():
    return [
        convt3d_case("ConvTranspose3d", "nn.ConvTranspose3d(3, 4, 2, {stride = 2})", tnn.ConvTranspose3d(3, 4, 2, stride=2),
                     (2, 3, 2, 3, 2)),
        convt3d_case("ConvTranspose3d_options",
                     "nn.ConvTranspose3d(4, 6, {3, 2, 3}, {stride = {2, 1, 2}, padding = {1, 0, 1}, output_padding = {1, 0, 0}, "
                     "groups = 2, dilation = {1, 2, 1}, bias = false})",
                     tnn.ConvTranspose3d(4, 6, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1), output_padding=(1, 0, 0),
                                         groups=2, dilation=(1, 2, 1), bias=False), (1, 4, 3, 3, 2)),
        convt3d_case("ConvTranspose3d_crop_unbatched", "nn.ConvTranspose3d(2, 3, {1, 3, 2}, {padding = {0, 2, 1}, stride = {1, 1, 3}})",
                     tnn.ConvTranspose3d(2, 3, (1, 3, 2), padding=(0, 2, 1), stride=(1, 1, 3)), (2, 2, 4, 3)),
        convt3d_case("ConvTranspose3d_output_size", "nn.ConvTranspose3d(2, 2, 3, {stride = 2, padding = 1})",
                     tnn.ConvTranspose3d(2, 2, 3, stride=2, padding=1), (1, 2, 2, 3, 2), output_size=(4, 6, 3)),
    ]


def mlml_case(name, x_shape, target, reduction, values=None):
    """torch's MultiLabelMarginLoss on a float64 input (random, or `values`): the loss, the input's
    gradient of sum(loss * w); the target written 1-based (+1: PyTorch's -1 end marker becomes 0)."""
    x = torch.randn(*x_shape, dtype=torch.float64) if values is None else torch.tensor(values, dtype=torch.float64)
    x.requires_grad_(True)
    t = torch.tensor(target, dtype=torch.int64)
    out = tnn.MultiLabelMarginLoss(reduction=reduction)(x, t)
    w = torch.randn(out.shape, dtype=torch.float64)
    (out * w).sum().backward()
    return {"name": name, "reduction": reduction, "x": x, "target": t + 1, "w": w, "out": out, "grad_x": x.grad}


def mlml():
    return [
        mlml_case("mean", (3, 5), [[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 0, 0, 0, 0]], "mean"),
        mlml_case("sum_repeats", (2, 4), [[1, 1, 2, -1], [0, 3, 2, 1]], "sum"),
        mlml_case("none", (4, 6), [[5, -1, 2, 2, 2, 2], [0, 1, 2, 3, 4, -1], [2, 4, -1, 0, 0, 0], [3, 1, 0, -1, 0, 0]], "none"),
        mlml_case("unbatched", (5,), [4, 0, -1, 1, 1], "none"),
        # a repeated id counts again (within the margin, so the repeat matters)
        mlml_case("repeats_in_margin", (1, 4), [[0, 0, -1, 0]], "sum", [[0.1, 0.2, 0.4, 0.8]]),
    ]


def fractional_case(name, ctor, kernel, shape, output_size=None, output_ratio=None):
    """torch's FractionalMaxPool2d with given _random_samples (drawn here, [N, C, 2]): values,
    indices (+1), the input's gradient of sum(y * w)."""
    nd = 3 if "3d" in ctor else 2
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    n, c = (1, shape[0]) if len(shape) == nd + 1 else shape[:2]
    samples = torch.rand(n, c, nd, dtype=torch.float64)
    pool = tnn.functional.fractional_max_pool3d if nd == 3 else tnn.functional.fractional_max_pool2d
    y, idx = pool(x, kernel, output_size=output_size, output_ratio=output_ratio, return_indices=True,
                  _random_samples=samples)
    w = torch.randn(y.shape, dtype=torch.float64)
    (y * w).sum().backward()
    return {"name": name, "ctor": ctor, "x": x, "samples": samples, "out": y, "indices": idx + 1, "w": w, "grad_x": x.grad}


def fractional():
    return [
        fractional_case("output_size", "nn.FractionalMaxPool2d(3, {output_size = {4, 5}, return_indices = true, _random_samples = s})",
                        3, (2, 3, 9, 8), output_size=(4, 5)),
        fractional_case("output_ratio", "nn.FractionalMaxPool2d({2, 3}, {output_ratio = {0.5, 0.7}, return_indices = true, _random_samples = s})",
                        (2, 3), (1, 2, 10, 11), output_ratio=(0.5, 0.7)),
        fractional_case("unbatched_one_output", "nn.FractionalMaxPool2d(2, {output_size = {1, 6}, return_indices = true, _random_samples = s})",
                        2, (2, 5, 7), output_size=(1, 6)),
        fractional_case("3d_output_size", "nn.FractionalMaxPool3d({2, 3, 2}, {output_size = {3, 4, 4}, return_indices = true, _random_samples = s})",
                        (2, 3, 2), (2, 2, 7, 9, 10), output_size=(3, 4, 4)),
        fractional_case("3d_ratio_unbatched", "nn.FractionalMaxPool3d(2, {output_ratio = 0.6, return_indices = true, _random_samples = s})",
                        2, (3, 8, 9, 10), output_ratio=(0.6, 0.6, 0.6)),
    ]


def asm():
    """torch's AdaptiveLogSoftmaxWithLoss(6, 12, [3, 7], div_value=2, head_bias=True) in float64: its
    state dict, forward(x, target) (targets +1: ember's are 1-based) output and loss, the gradients of
    sum(output * w) + loss for x and every parameter, log_prob(x), predict(x) (+1), and an unbatched call."""
    m = tnn.AdaptiveLogSoftmaxWithLoss(6, 12, [3, 7], div_value=2.0, head_bias=True).double()
    x = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 5, 11, 2, 7, 3, 9])
    r = m(x, target)
    w = torch.randn(7, dtype=torch.float64)
    ((r.output * w).sum() + r.loss).backward()
    names = list(m.state_dict().keys())
    params = dict(m.named_parameters())
    x1 = torch.randn(6, dtype=torch.float64)
    r1 = m(x1, torch.tensor(8))
    return {"names": names, "state": [m.state_dict()[n] for n in names], "x": x, "target": target + 1, "w": w,
            "output": r.output, "loss": r.loss, "grad_x": x.grad, "grads": [params[n].grad for n in names],
            "log_prob": m.log_prob(x.detach()), "predict": m.predict(x.detach()) + 1,
            "x1": x1, "target1": 9, "output1": r1.output, "loss1": r1.loss}


def main():
    Writer(keys="auto").write("tests/fixtures/nn_wrappers.lua", "tests/gen_nn_wrappers.py",
                              {"seed": SEED, "pads": pads(), "containers": containers(), "pools3d": pools3d(), "convt3d": convt3d(), "mlml": mlml(), "fractional": fractional(), "asm": asm()})


if __name__ == "__main__":
    main()
