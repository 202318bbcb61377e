s = input().strip()
count = {}
for ch in s:
    count[ch] = count.get(ch, 0) + 1
keys = sorted(count)
for k in keys:
    if count[k] > 1:
        print(k, count[k])
