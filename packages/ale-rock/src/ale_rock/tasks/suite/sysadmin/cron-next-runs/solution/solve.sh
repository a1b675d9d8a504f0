cp .ale_solution/cronnext.py cronnext.py
n=0
while IFS= read -r line; do
  n=$((n+1))
  python3 cronnext.py "$line" "2024-02-27 23:30" 3 | sed "s/^/$n: /"
done < crontab.txt > upcoming.txt
