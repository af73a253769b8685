import socket, subprocess, sys, time, threading
# Writes items more (4 connections, pipelined, acknowledged with mn), SIGKILLs the server at
# once, restarts it and times the restart (recovery replays the log since the last
# checkpoint); then checks 2,000 of the new items.
# python3 warm-restart-kill.py none: 400,000 items with --durability none
# python3 warm-restart-kill.py sync: 40,000 items with --durability sync
DURABILITY = sys.argv[1] if len(sys.argv) > 1 else "none"
BATCHES = 100 if DURABILITY == "none" else 10  # of 1,000 items per connection
PREFIX = "new" if DURABILITY == "none" else "sync"
p = subprocess.Popen(["target/release/ferrite", "serve", "--db", "/work/benchdata/warm", "--listen", "127.0.0.1:22211",
                      "--memory-mib", "256", "--durability", DURABILITY], stdout=subprocess.PIPE, text=True)
p.stdout.readline()
def writer(c):
    s = socket.create_connection(("127.0.0.1", 22211))
    for b in range(BATCHES):
        req = b"".join(f"set {PREFIX}:{c}:{b*1000+i:07} 0 0 64 noreply\r\n{'x'*64}\r\n".encode() for i in range(1000))
        s.sendall(req + b"mn\r\n")
        buf = b""
        while not buf.endswith(b"MN\r\n"): buf += s.recv(65536)
    s.close()
t = time.time()
threads = [threading.Thread(target=writer, args=(c,)) for c in range(4)]
[x.start() for x in threads]; [x.join() for x in threads]
print(f"wrote {4 * BATCHES * 1000:,} items in {time.time()-t:.1f} s; SIGKILL")
p.kill(); p.wait()
t0 = time.time()
p = subprocess.Popen(["target/release/ferrite", "serve", "--db", "/work/benchdata/warm", "--listen", "127.0.0.1:22211",
                      "--memory-mib", "256", "--durability", DURABILITY], stdout=subprocess.PIPE, text=True)
line = p.stdout.readline().strip()
t1 = time.time()
s = socket.create_connection(("127.0.0.1", 22211))
hits = 0
for i in range(0, BATCHES * 1000, BATCHES // 2):
    s.sendall(f"get {PREFIX}:2:{i:07}\r\n".encode()); buf = b""
    while not buf.endswith(b"END\r\n"): buf += s.recv(65536)
    hits += buf.startswith(b"VALUE")
print(f"restart after SIGKILL: listening after {t1-t0:.2f} s; {hits} of 2000 new items read back (durability {DURABILITY})")
p.terminate(); p.wait()
