"""Pretend to train MODEL for EPOCHS epochs on the upstream features; publish its error."""

import os
import time

from dagq.task import get_upstream_output, set_output

features = get_upstream_output("featurize")
model = os.environ["MODEL"]
epochs = int(os.environ.get("EPOCHS", "1"))
mae = 0.5
for epoch in range(1, epochs + 1):
    time.sleep(0.3)
    mae /= 2
    print(f"{model} epoch {epoch}/{epochs} on {features['stats']['rows']} rows: mae={mae:.3f}")
set_output({"model": model, "mae": mae})
