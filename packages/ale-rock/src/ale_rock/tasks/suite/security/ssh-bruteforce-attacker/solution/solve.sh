python3 - <<'PY'
import ipaddress, json, re
fails, first = {}, {}
out = {}
for line in open("auth.log"):
    m = re.search(r"Failed password for (?:invalid user )?(\S+) from (\S+)", line)
    if m:
        fails[m.group(2)] = fails.get(m.group(2), 0) + 1
        continue
    m = re.search(r"Accepted \S+ for (\S+) from (\S+)", line)
    if m and fails.get(m.group(2), 0) >= 5 and "attacker_ip" not in out:
        out.update(attacker_ip=m.group(2), compromised_user=m.group(1), first_success=line[:15])
out["failed_by_ip"] = fails
json.dump(out, open("findings.json", "w"), indent=2)
block = sorted((ip for ip, n in fails.items() if n >= 5), key=ipaddress.ip_address)
open("blocklist.txt", "w").write("".join(ip + "\n" for ip in block))
PY
