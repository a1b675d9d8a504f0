python3 - <<'PY'
import random
rng = random.Random(2024)
centers = [(-5, -5), (5, 5), (-5, 6), (6, -4)]
with open("points.csv", "w") as f:
    f.write("x,y\n")
    for i in range(240):
        cx, cy = centers[i % 4]
        f.write(f"{cx + rng.gauss(0, 1.2):.4f},{cy + rng.gauss(0, 1.2):.4f}\n")
PY
