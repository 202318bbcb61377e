rec = input().split()
n, a, b = map(int, rec)
nin = [a, b]
nmax = min(nin)
nmin = max(0, a + b - n)
print(nmax, nmin)
