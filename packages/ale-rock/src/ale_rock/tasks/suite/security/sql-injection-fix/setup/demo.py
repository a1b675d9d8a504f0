from userdb import add_user, connect, find_users, list_users, login

conn = connect()
add_user(conn, "alice", "alice@example.com", "s3cret", "2024-01-02", admin=1)
add_user(conn, "bob", "bob@example.com", "hunter2", "2024-03-04")
print(find_users(conn, "al"))
print(login(conn, "bob", "hunter2"))
print(list_users(conn, "created desc"))
