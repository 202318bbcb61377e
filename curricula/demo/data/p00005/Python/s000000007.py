n = int(input())
a = list(map(int, input().split()))
a.sort()
lo, hi = 0, n - 1
pairs = 0
while lo < hi:
    if a[lo] + a[hi] <= 10:
        pairs += 1
        lo += 1
    hi -= 1
print(pairs, a[::-1][:3])
