print("orders app")
