"""torchrun's shape, silent (bench/status_target.py's job): a parent listening as a rendezvous store would, two
children with a rank's environment each holding a connection to it and polling for a `stop` file beside this
script every 0.2 s, printing nothing. Run without -u, their stdout is block-buffered, with nothing in it."""
import os, socket, subprocess, sys, time
here = os.path.dirname(os.path.abspath(__file__))
if sys.argv[1:2] == ['rank']:
    c = socket.create_connection(('127.0.0.1', int(os.environ['MASTER_PORT'])))
    while not os.path.exists(os.path.join(here, 'stop')):
        time.sleep(0.2)
    sys.exit(0)
s = socket.socket()
s.bind(('127.0.0.1', 0))
s.listen(4)
port = str(s.getsockname()[1])
kids = [subprocess.Popen([sys.executable, __file__, 'rank'], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE='2', MASTER_ADDR='127.0.0.1', MASTER_PORT=port)) for r in (0, 1)]
conns = [s.accept()[0] for k in kids]
for k in kids:
    k.wait()
