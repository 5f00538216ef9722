"""PyTorch peer of the run benchmark (tools/src/bench/run.ts): trains the architecture it is given
with SGD on one CPU thread and times windows of training steps when asked.

Protocol, one JSON object a line: the first line on stdin is the set-up
  {"architecture": {"input": [...], "classes": n, "layers": [...]}, "batch": 32,
   "stepsPerCall": 16, "lr": 0.01, "seed": 1}
and the script answers {"ready": true, "torch": version, "parameters": n, "output": [batch, classes],
"threads": n} after one warm-up call (a call is stepsPerCall optimizer steps of one batch each).
Each later line {"window": seconds} runs whole calls until that much time has passed (at least
one) and answers {"calls": k, "seconds": elapsed}. End of input ends the script. A failure
answers {"error": message} and exits 1.
"""

import json
import sys
import time


def build(torch, arch):
    """torch.nn.Sequential of the layer list run.ts derived from the imported ONNX graph."""
    nn = torch.nn
    layers = []
    for layer in arch["layers"]:
        kind = layer["type"]
        if kind == "linear":
            layers.append(nn.Linear(layer["in"], layer["out"], bias=layer["bias"]))
        elif kind == "conv2d":
            layers.append(
                nn.Conv2d(
                    layer["in"],
                    layer["out"],
                    tuple(layer["kernel"]),
                    stride=tuple(layer["stride"]),
                    padding=tuple(layer["padding"]),
                    dilation=tuple(layer["dilation"]),
                    groups=layer["groups"],
                    bias=layer["bias"],
                )
            )
        elif kind == "batchnorm2d":
            # train mode (set below): each batch is normalised with its own statistics, as the ONNX model does
            layers.append(nn.BatchNorm2d(layer["features"], eps=layer["eps"], momentum=layer["momentum"]))
        elif kind == "maxpool2d":
            layers.append(
                nn.MaxPool2d(
                    tuple(layer["kernel"]),
                    stride=tuple(layer["stride"]),
                    padding=tuple(layer["padding"]),
                    dilation=tuple(layer["dilation"]),
                    ceil_mode=layer["ceilMode"],
                )
            )
        elif kind == "flatten":
            layers.append(nn.Flatten())
        elif kind == "relu":
            layers.append(nn.ReLU())
        elif kind == "tanh":
            layers.append(nn.Tanh())
        elif kind == "sigmoid":
            layers.append(nn.Sigmoid())
        else:
            raise ValueError(f"unknown layer type {kind!r}")
    return nn.Sequential(*layers)


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    import torch

    # the emulated IPU and the other peers run on one CPU thread each
    torch.set_num_threads(1)
    setup = json.loads(sys.stdin.readline())
    arch = setup["architecture"]
    batch = setup["batch"]
    steps = setup["stepsPerCall"]
    torch.manual_seed(setup["seed"])
    model = build(torch, arch)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=setup["lr"])
    loss_fn = torch.nn.CrossEntropyLoss(reduction="mean")
    xs = torch.randn(steps, batch, *arch["input"])
    ys = torch.randint(0, arch["classes"], (steps, batch))

    def call():
        for s in range(steps):
            optimizer.zero_grad()
            loss = loss_fn(model(xs[s]), ys[s])
            loss.backward()
            optimizer.step()

    with torch.no_grad():
        output = list(model(xs[0]).shape)
    call()  # warm-up
    reply(
        {
            "ready": True,
            "torch": torch.__version__,
            "parameters": sum(p.numel() for p in model.parameters()),
            "output": output,
            "threads": torch.get_num_threads(),
        }
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        seconds = float(json.loads(line)["window"])
        calls = 0
        t0 = time.perf_counter()
        while True:
            call()
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                break
        reply({"calls": calls, "seconds": elapsed})


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # reported to run.ts, which says why the peer is unavailable
        reply({"error": f"{type(e).__name__}: {e}"})
        sys.exit(1)
