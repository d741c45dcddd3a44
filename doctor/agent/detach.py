# dfdoctor's own hand-off, the strategy `dfdoctor`: `python -c "<this file>" LOG CMD...` starts CMD with SIGHUP
# ignored before the fork, in a new session, stdin from /dev/null, its output appended to LOG: what `dfdoctor
# launch` itself does (doctor/launch/local.py: spawn_detached), for targets where only python is there to do it.
# It travels inside the strategy's shell line (dfdoctor.agent.ship.detach_code, without these comment lines).
import signal, subprocess, sys
if __name__ == "__main__":
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    f = open(sys.argv[1], "ab")
    subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=f, stderr=f, start_new_session=True)
