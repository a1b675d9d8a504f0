python3 - <<'PY'
import random
rng = random.Random(31)
lines = []
t = 3 * 3600
def stamp():
    global t
    t += rng.randint(1, 40)
    return f"Mar  3 {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
def fail(ip, user, invalid=False):
    port = rng.randint(30000, 60000)
    who = f"invalid user {user}" if invalid else user
    lines.append(f"{stamp()} web01 sshd[{rng.randint(1000, 9999)}]: Failed password for {who} from {ip} port {port} ssh2")
def ok(ip, user):
    lines.append(f"{stamp()} web01 sshd[{rng.randint(1000, 9999)}]: Accepted password for {user} from {ip} port {rng.randint(30000, 60000)} ssh2")
ok("10.0.0.5", "deploy"); fail("10.0.0.5", "deploy"); ok("10.0.0.5", "deploy")
for u in ["root", "admin", "test", "oracle", "root", "admin", "guest"]:
    fail("203.0.113.77", u, invalid=u in ("test", "oracle", "guest"))
for u in ["root"] * 3:
    fail("198.51.100.9", u)
for u in ["ubuntu", "pi", "ubuntu", "backup", "backup", "backup"]:
    fail("45.13.2.200", u, invalid=u == "pi")
ok("45.13.2.200", "backup")
lines.append(f"{stamp()} web01 sshd[4242]: Received disconnect from 45.13.2.200 port 51111:11: bye")
for u in ["root"] * 5:
    fail("9.9.9.10", u)
lines.append(f"{stamp()} web01 CRON[77]: pam_unix(cron:session): session opened for user root")
open("auth.log", "w").write("\n".join(lines) + "\n")
PY
