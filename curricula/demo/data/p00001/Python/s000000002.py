n = int(input())
total = 0
best = None
for i in range(n):
    x, y = map(int, input().split())
    s = x + y
    total += s
    if best is None or s > best:
        best = s
print(best, total)
