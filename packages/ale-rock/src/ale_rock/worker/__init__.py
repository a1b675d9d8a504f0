"""The Worker: runs sandboxes through a backend and serves WorkerService plus the Rocklet proxy."""
