import os, subprocess, json, time, sys
tick = os.sysconf('SC_CLK_TCK')
def pg_cpu():
    total = 0
    for pid in os.listdir('/proc'):
        if not pid.isdigit(): continue
        try:
            comm = open(f'/proc/{pid}/comm').read().strip()
            if comm not in ('postgres',) and not comm.startswith('postgres'): continue
            f = open(f'/proc/{pid}/stat').read().rsplit(')',1)[1].split()
            # fields after ')': state=0, ... utime=11, stime=12, cutime=13, cstime=14
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
        except Exception: pass
    return total / tick
out = open('/tmp/ab/pgcpu.jsonl','w')
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
for r in range(rounds):
    order = ['base','new'] if r % 2 == 0 else ['new','base']
    for side in order:
        time.sleep(1)
        before = pg_cpu()
        res = subprocess.run([f'/tmp/ab/{side}/weft-bench','--only','loop1000_postgres'],capture_output=True,text=True)
        time.sleep(1.5)
        after = pg_cpu()
        line = [l for l in res.stdout.splitlines() if l.startswith('{')][-1]
        x = json.loads(line)
        ops = x['repeats'] + 1
        rec = {'side':side,'round':r+1,'median_ms':round(x['median_s']*1e3,1),'client_cpu_ms':round(x['median_cpu_s']*1e3,1),'pg_cpu_s_total':round(after-before,2),'ops':ops,'pg_cpu_ms_per_op':round((after-before)*1e3/ops,1),'load':open('/proc/loadavg').read().split()[0]}
        print(json.dumps(rec)); out.write(json.dumps(rec)+'\n'); out.flush()
