python3 - <<'PY'
import math, random
rng = random.Random(17)
with open("loans.csv", "w") as f:
    f.write("income,debt,age,default\n")
    for _ in range(400):
        inc, debt, age = rng.gauss(55000, 15000), rng.gauss(20000, 9000), rng.randint(21, 70)
        z = -0.00011 * (inc - 55000) + 0.00025 * (debt - 20000) - 0.03 * (age - 45)
        f.write(f"{inc:.0f},{debt:.0f},{age},{int(rng.random() < 1 / (1 + math.exp(-z)))}\n")
PY
