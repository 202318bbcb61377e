n = int(input())
pairs = []
for _ in range(n):
    a, b = map(int, input().split())
    pairs.append(a + b)
best = max(pairs)
print(best, sum(pairs))
