import socket, subprocess, sys, time, random
# A restart of ferrite serve on the 10 M items: time to "listening on", then 1,000 random
# GETs of the bench's keys on one connection (every one must hit).
signal_kind = sys.argv[1] if len(sys.argv) > 1 else "clean"
t0 = time.time()
p = subprocess.Popen(["target/release/ferrite", "serve", "--db", "/work/benchdata/warm", "--listen", "127.0.0.1:22211",
                      "--memory-mib", "256", "--durability", "none"], stdout=subprocess.PIPE, text=True)
line = p.stdout.readline().strip()
t1 = time.time()
s = socket.create_connection(("127.0.0.1", 22211))
rng = random.Random(7)
hits = 0
for i in range(1000):
    k = rng.randrange(10_000_000)
    s.sendall(f"get key:{k:010}\r\n".encode())
    buf = b""
    while not buf.endswith(b"END\r\n"):
        buf += s.recv(65536)
    hits += buf.startswith(b"VALUE")
t2 = time.time()
print(f"{signal_kind}: listening after {t1-t0:.2f} s; 1000 random GETs, {hits} hits, done after {t2-t0:.2f} s")
s.close()
if signal_kind == "kill":
    p.kill()
else:
    p.terminate()
p.wait()
