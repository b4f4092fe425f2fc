"""memcached text protocol over one connection: SET then GET of values from
64 B to ~100 KB (sha256-derived, so every byte is checked), pipelined and not.
Prints 'memcached_data_check: OK <n> values' or the first mismatch; exits 1 then."""
import hashlib, socket, sys

port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rwb")

def value(i):
    return hashlib.sha256(str(i).encode()).hexdigest().encode() * (1 + (i * 97) % 1600)

def fail(msg):
    print("memcached_data_check: FAIL", msg, flush=True)
    sys.exit(1)

for i in range(n):
    v = value(i)
    f.write(b"set k%d 0 0 %d\r\n%s\r\n" % (i, len(v), v)); f.flush()
    r = f.readline()
    if r != b"STORED\r\n":
        fail("set k%d: %r" % (i, r))
# GETs pipelined 16 at a time: the replies come back to back.
for base in range(0, n, 16):
    keys = range(base, min(n, base + 16))
    f.write(b"".join(b"get k%d\r\n" % i for i in keys)); f.flush()
    for i in keys:
        hdr = f.readline().split()
        if len(hdr) != 4 or hdr[0] != b"VALUE" or hdr[1] != b"k%d" % i:
            fail("get k%d: header %r" % (i, hdr))
        data = f.read(int(hdr[3]) + 2)
        if data[:-2] != value(i) or data[-2:] != b"\r\n":
            fail("get k%d: value differs" % i)
        if f.readline() != b"END\r\n":
            fail("get k%d: no END" % i)
print("memcached_data_check: OK %d values" % n, flush=True)
