# gdb script (walk.sh): a breakpoint on every function of ecdn_node ($WALK_SYMS: `nm` lines,
# relative to the load address $WALK_BASE); at each entry, the stack of the frames in
# ecdn-node's source files (file, function), outermost first, appended to $WALK_OUT as one
# JSON line. The breakpoints never stop the node (`stop` returns False).
import gdb, os, json
OUT = open(os.environ["WALK_OUT"], "w")
SRC = "ecdn-node/src/"

def ecdn_stack():
    f = gdb.newest_frame()
    out = []
    while f is not None:
        try:
            sal = f.find_sal()
            fn = sal.symtab.filename if sal.symtab else ""
        except Exception:
            fn = ""
        if SRC in fn:
            out.append((fn.split(SRC, 1)[1], f.name() or "?"))
        f = f.older()
    out.reverse()
    return out

class Hit(gdb.Breakpoint):
    def stop(self):
        try:
            st = ecdn_stack()
            OUT.write(json.dumps({"t": gdb.selected_thread().num, "s": st}) + "\n")
        except Exception as e:
            OUT.write(json.dumps({"err": str(e)}) + "\n")
        return False

# every function of ecdn_node (its own and its impls', by the ELF symbols: line tables only)
n = 0
for line in open(os.environ["WALK_SYMS"]):
    addr = int(line.split()[0], 16) + int(os.environ["WALK_BASE"], 16)
    try:
        Hit("*0x%x" % addr, internal=True)
        n += 1
    except Exception:
        pass
gdb.write("breakpoints: %d\n" % n)
OUT.flush()
