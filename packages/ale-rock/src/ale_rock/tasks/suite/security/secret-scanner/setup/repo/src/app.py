import os

PASSWORD = os.environ["APP_PASSWORD"]
token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
pwd: "s3cr3t!"
not_a_key = "AKIA1234"
