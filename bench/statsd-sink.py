# A statsd agent that reads and discards, on 127.0.0.1:8125 over UDP and TCP,
# so that `make bench` targets with USE_STATSD=true send to something
# (docs/performance.md, "envoyproxy's stats"). Run it beside the bench:
#   python3 bench/statsd-sink.py &
import socket, threading
u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.bind(("127.0.0.1",8125))
t=socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1",8125)); t.listen(16)
def udp():
    while True: u.recv(65536)
def conn(c):
    while c.recv(65536): pass
def tcp():
    while True:
        c,_=t.accept(); threading.Thread(target=conn,args=(c,),daemon=True).start()
threading.Thread(target=udp,daemon=True).start()
tcp()
