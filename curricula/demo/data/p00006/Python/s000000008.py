words = input().split()
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
top = counts["zebra"]
print(top)
