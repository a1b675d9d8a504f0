from stats import moving_average, percentile

data = [3, 1, 4, 1, 5, 9, 2, 6]
print("ma3", moving_average(data, 3))
print("p50", percentile(data, 50))
