/* labtool: tiny static helper for the uevd lab guest.
 *
 *   labtool now                 monotonic clock, seconds with 6 decimals
 *   labtool walk read  DIR      read every regular file named "uevent" below DIR
 *   labtool walk write DIR [ACTION]
 *                               write ACTION (default "add") into every "uevent"
 *   labtool tree PID...         CPU ticks and memory of the given processes and
 *                               all their live descendants:
 *                               "ticks=<utime+stime+cutime+cstime> hwm_kb=<max VmHWM
 *                                of the descendants> rss_kb=<sum VmRSS> procs=<n>
 *                                root_hwm_kb=<VmHWM of PID>"
 *   labtool cpu                 busy and total jiffies of the whole machine from /proc/stat
 *   labtool hz                  sysconf(_SC_CLK_TCK)
 *   labtool clock               what one clock_gettime(CLOCK_BOOTTIME) costs here:
 *                               "clock_ns=<mean of 20000 reads>" (a system call
 *                               where the clock source has no vDSO, as the
 *                               HPET under TCG)
 *   labtool devstat DIR         counts under DIR (normally /dev): "nodes= blk= chr=
 *                               links= dirs=" then one "links.<subdir>=<n>" per
 *                               directory holding symlinks (relative to DIR)
 *   labtool dump DIR            one line per entry below DIR:
 *                                 b|c MAJ:MIN MODE UID:GID PATH
 *                                 l PATH -> TARGET
 *                                 d MODE UID:GID PATH
 *                                 f MODE UID:GID SIZE PATH   (other files)
 *   labtool cat DIR             "==> NAME" then the contents of every regular
 *                               file directly in DIR (the udev database)
 *   labtool insmod MODDIR LIST [JOBS]
 *                               the kernel's part of loading drivers: every
 *                               module named in LIST (one a line) and what
 *                               MODDIR/modules.dep says it needs, each
 *                               inserted with finit_module by a thread of
 *                               its own as soon as its dependencies are in,
 *                               at most JOBS at a time (default: no limit).
 *                               No alias lookup, options or soft dependencies.
 *                               Prints "inserted=<n> failed=<n> loaded=<n>"
 *                               (loaded: there before)
 *
 *   labtool uprofile OUT [PERIOD_NS [callers]]
 *                               samples every CPU (user and kernel mode) every
 *                               PERIOD_NS of CPU time (default 500000) until
 *                               SIGINT or SIGTERM, then writes the counts by
 *                               process, thread and address to OUT (see below);
 *                               with "callers", user-mode samples also by their
 *                               first frames (for binaries with frame pointers)
 *
 * Symlinks are never followed in walks, so each sysfs object is visited once.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long n_files, n_err;
static const char *action = "add";

static void walk(int dfd, int do_write)
{
    DIR *d = fdopendir(dfd);
    if (!d) { close(dfd); return; }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))
            continue;
        unsigned char t = e->d_type;
        if (t == DT_UNKNOWN) {
            struct stat st;
            if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW))
                continue;
            t = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
        }
        if (t == DT_DIR) {
            int c = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (c >= 0)
                walk(c, do_write);
        } else if (t == DT_REG && strcmp(n, "uevent") == 0) {
            int f = openat(dirfd(d), n, (do_write ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
            if (f < 0) { n_err++; continue; }
            if (do_write) {
                if (write(f, action, strlen(action)) < 0) n_err++;
                else n_files++;
            } else {
                char buf[4096];
                ssize_t r;
                while ((r = read(f, buf, sizeof buf)) > 0)
                    ;
                if (r < 0) n_err++; else n_files++;
            }
            close(f);
        }
    }
    closedir(d);
}

static int read_file(const char *path, char *buf, size_t len)
{
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return -1;
    ssize_t r = read(f, buf, len - 1);
    close(f);
    if (r < 0) return -1;
    buf[r] = 0;
    return 0;
}

/* fields after "(comm)": state ppid ... utime(14) stime(15) cutime(16) cstime(17) */
static int proc_stat(int pid, int *ppid, unsigned long long *ticks)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (read_file(path, buf, sizeof buf)) return -1;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p += 2;
    char state; int pp; unsigned long long ut, st; long long cut, cst;
    if (sscanf(p, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld",
               &state, &pp, &ut, &st, &cut, &cst) != 6)
        return -1;
    *ppid = pp;
    *ticks = ut + st + (unsigned long long)cut + (unsigned long long)cst;
    return 0;
}

static long status_kb(int pid, const char *key)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (read_file(path, buf, sizeof buf)) return 0;
    char *p = strstr(buf, key);
    if (!p) return 0;
    return strtol(p + strlen(key) + 1, NULL, 10);
}

#define MAXP 65536
static int pids[MAXP], ppids[MAXP];
static unsigned long long tk[MAXP];

static int tree(int argc, char **argv)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < MAXP) {
        int pid = atoi(e->d_name);
        if (pid <= 0) continue;
        if (proc_stat(pid, &ppids[n], &tk[n]) == 0)
            pids[n++] = pid;
    }
    if (d) closedir(d);
    static char in[MAXP];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < argc; a++)
            if (pids[i] == atoi(argv[a])) in[i] = 1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (in[i]) continue;
            for (int j = 0; j < n; j++)
                if (in[j] && pids[j] == ppids[i]) { in[i] = 1; changed = 1; break; }
        }
    }
    unsigned long long ticks = 0; long hwm = 0, rss = 0, root_hwm = 0; int procs = 0;
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        procs++;
        ticks += tk[i];
        long h = status_kb(pids[i], "VmHWM:");
        int root = 0;
        for (int a = 0; a < argc; a++)
            if (pids[i] == atoi(argv[a])) root = 1;
        if (root) { if (h > root_hwm) root_hwm = h; }
        else if (h > hwm) hwm = h;
        rss += status_kb(pids[i], "VmRSS:");
    }
    /* hwm_kb: largest VmHWM among the descendants (workers);
     * root_hwm_kb: VmHWM of the given process(es) */
    printf("ticks=%llu hwm_kb=%ld rss_kb=%ld procs=%d root_hwm_kb=%ld\n", ticks, hwm, rss, procs, root_hwm);
    return 0;
}

/* ---------------------------------------------------------------- /dev */
#include <sys/sysmacros.h>
static long c_blk, c_chr, c_lnk, c_dir, c_oth;
#define MAXD 4096
static char *ldir[MAXD];
static long lcnt[MAXD];
static int nld;

static void count_link(const char *rel)
{
    const char *slash = strrchr(rel, '/');
    char d[1024];
    if (!slash) strcpy(d, "top");
    else { size_t l = (size_t)(slash - rel); if (l >= sizeof d) l = sizeof d - 1; memcpy(d, rel, l); d[l] = 0; }
    for (int i = 0; i < nld; i++)
        if (!strcmp(ldir[i], d)) { lcnt[i]++; return; }
    if (nld < MAXD) { ldir[nld] = strdup(d); lcnt[nld++] = 1; }
}

/* mode 0: count, 1: dump */
static void devwalk(const char *path, const char *rel, int mode)
{
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))
            continue;
        char p[4096], r[4096];
        snprintf(p, sizeof p, "%s/%s", path, n);
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", n);
        struct stat st;
        if (lstat(p, &st)) continue;
        if (S_ISLNK(st.st_mode)) {
            c_lnk++;
            if (mode == 0) count_link(r);
            else {
                char t[4096];
                ssize_t l = readlink(p, t, sizeof t - 1);
                t[l < 0 ? 0 : l] = 0;
                printf("l %s -> %s\n", p, t);
            }
        } else if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode)) {
            if (S_ISBLK(st.st_mode)) c_blk++; else c_chr++;
            if (mode == 1)
                printf("%c %u:%u %04o %u:%u %s\n", S_ISBLK(st.st_mode) ? 'b' : 'c',
                       major(st.st_rdev), minor(st.st_rdev), st.st_mode & 07777,
                       st.st_uid, st.st_gid, p);
        } else if (S_ISDIR(st.st_mode)) {
            c_dir++;
            if (mode == 1)
                printf("d %04o %u:%u %s\n", st.st_mode & 07777, st.st_uid, st.st_gid, p);
            devwalk(p, r, mode);
        } else {
            c_oth++;
            if (mode == 1)
                printf("f %04o %u:%u %lld %s\n", st.st_mode & 07777, st.st_uid, st.st_gid,
                       (long long)st.st_size, p);
        }
    }
    closedir(d);
}

static int catdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    char buf[65536];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) || !S_ISREG(st.st_mode)) continue;
        int f = open(p, O_RDONLY | O_CLOEXEC);
        if (f < 0) continue;
        printf("==> %s\n", e->d_name);
        fflush(stdout);
        ssize_t r;
        int last = '\n';
        while ((r = read(f, buf, sizeof buf)) > 0) {
            fwrite(buf, 1, (size_t)r, stdout);
            last = buf[r - 1];
        }
        if (last != '\n') putchar('\n');
        close(f);
    }
    closedir(d);
    return 0;
}

/* /proc/profile (kernel booted with profile=N): one unsigned int of
 * timer-tick hits per (1 << N)-byte slot of the kernel's core text from
 * _stext, after a first word holding the slot size. Debian's System.map
 * is a stub and KASLR moves the text every boot, so the slots are named
 * here, from this boot's /proc/kallsyms: a "hits function" line for each
 * function hit. */
/* kind: for labtool uprofile, whether the function enters a system call
 * (1: __x64_sys_*, 2: the x64_sys_call dispatcher). */
struct ksym { unsigned long addr; char *name; unsigned long hits; int kind; };
static int ksym_cmp(const void *a, const void *b)
{
    const struct ksym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}
/* This boot's text symbols from /proc/kallsyms, sorted by address; *stext
 * gets _stext. */
static struct ksym *load_ksyms(size_t *count, unsigned long *stext)
{
    FILE *ks = fopen("/proc/kallsyms", "re");
    if (!ks) { perror("/proc/kallsyms"); return NULL; }
    size_t n = 0, cap = 1 << 16;
    struct ksym *sym = malloc(cap * sizeof *sym);
    char line[512], name[256], type;
    unsigned long addr;
    *stext = 0;
    while (sym && fgets(line, sizeof line, ks)) {
        if (sscanf(line, "%lx %c %255s", &addr, &type, name) != 3) continue;
        if (type != 't' && type != 'T') continue;
        if (!strcmp(name, "_stext")) *stext = addr;
        if (n == cap) sym = realloc(sym, (cap *= 2) * sizeof *sym);
        if (!sym) break;
        sym[n].addr = addr;
        sym[n].name = strdup(name);
        sym[n].hits = 0;
        sym[n].kind = !strncmp(name, "__x64_sys_", 10) || !strncmp(name, "__ia32_sys_", 11) ? 1
                      : !strcmp(name, "x64_sys_call") ? 2 : 0;
        n++;
    }
    fclose(ks);
    if (!sym || !*stext) {
        fprintf(stderr, "labtool: no _stext in /proc/kallsyms (addresses hidden?)\n");
        return NULL;
    }
    qsort(sym, n, sizeof *sym, ksym_cmp);
    *count = n;
    return sym;
}
/* The symbol holding pc, or NULL. */
static struct ksym *ksym_at(struct ksym *sym, size_t n, unsigned long pc)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (sym[mid].addr <= pc) lo = mid; else hi = mid;
    }
    return n && sym[lo].addr <= pc ? &sym[lo] : NULL;
}
static int kprofile(void)
{
    /* the profile first: reading kallsyms is kernel work of its own */
    int f = open("/proc/profile", O_RDONLY | O_CLOEXEC);
    if (f < 0) { perror("/proc/profile (boot with profile=2)"); return 1; }
    size_t plen = 0, pcap = 1 << 20;
    unsigned int *prof = malloc(pcap * sizeof *prof);
    ssize_t r;
    while (prof && (r = read(f, prof + plen, (pcap - plen) * sizeof *prof)) > 0) {
        plen += r / sizeof *prof;
        if (plen == pcap) prof = realloc(prof, (pcap *= 2) * sizeof *prof);
    }
    close(f);
    if (!prof || plen == 0) { fprintf(stderr, "kprofile: /proc/profile unreadable\n"); return 1; }
    size_t n;
    unsigned long stext;
    struct ksym *sym = load_ksyms(&n, &stext);
    if (!sym) return 1;
    unsigned long step = prof[0], unknown = 0;
    for (size_t slot = 0; slot + 1 < plen; slot++) {
        unsigned int h = prof[slot + 1];
        if (!h) continue;
        struct ksym *k = ksym_at(sym, n, stext + slot * step);
        if (k) k->hits += h; else unknown += h;
    }
    for (size_t i = 0; i < n; i++)
        if (sym[i].hits) printf("%lu %s\n", sym[i].hits, sym[i].name);
    if (unknown) printf("%lu ?\n", unknown);
    return 0;
}

/* ---- labtool uprofile ----
 * Every CPU sampled by the kernel's cpu-clock software event, user and
 * kernel mode, whatever runs: each sample's process, thread and
 * instruction address, counted. perf itself is not in the guest; this is
 * the part of it the lab needs. Stopped by SIGINT or SIGTERM, it writes
 *   s SAMPLES LOST PERIOD_NS
 *   t PID TID SAMPLES USER_SAMPLES COMM      per thread
 *   u PID ADDRESS SAMPLES                    user-mode addresses
 *   k PID SAMPLES FUNCTION                   kernel mode, named from kallsyms
 *   y PID SAMPLES SYSCALL                    kernel mode, by the system call
 *                                            it was in (__x64_sys_*), else
 *                                            by the outermost three frames,
 *                                            how the kernel was entered
 *   i PID SAMPLES SYSCALL FUNCTION           kernel mode, each function with
 *                                            what it called, by system call
 *   c PID SAMPLES IP RET...                  with "callers": a user-mode sample's
 *                                            address and first return addresses
 *   m PID START END OFFSET PATH              executable mappings of every
 *                                            sampled process (from /proc when
 *                                            still alive, else as announced)
 * for lab/uprofile, which names the user addresses from the binaries. */
#define UP_PAGES 64 /* ring pages per CPU, a power of two */
#define UP_SLOTS (1 << 18)
struct up_slot { int pid; int user; unsigned long ip; unsigned long count; };
static struct up_slot up_tab[UP_SLOTS];
#define UP_TIDS 4096
struct up_tid { int pid, tid; unsigned long n, user; };
static struct up_tid up_tids[UP_TIDS];
static int up_ntids;
static unsigned long up_samples, up_lost, up_dropped;
/* Kernel-mode samples by the system call they were made in (the outermost
 * __x64_sys_* frame of the kernel call chain), per process. */
static struct ksym *up_ksyms;
static size_t up_nksyms;
#define UP_SYSCALLS 8192
struct up_sys { int pid; const char *name; unsigned long count; };
static struct up_sys up_sys[UP_SYSCALLS];
static int up_nsys;
/* With "callers": user-mode samples by their first frames (the address,
 * then return addresses found by frame pointers), per process. */
static int up_callers;
#define UP_CHAINS (1 << 16)
#define UP_DEPTH 8
struct up_chain { int pid; unsigned long ip[UP_DEPTH]; unsigned long count; };
static struct up_chain up_chains[UP_CHAINS];
static void up_count_chain(int pid, const unsigned long *chain, unsigned long nr)
{
    unsigned long ip[UP_DEPTH] = {0};
    int d = 0;
    for (unsigned long i = 0; i < nr && d < UP_DEPTH; i++)
        if (chain[i] < (unsigned long)-4095) ip[d++] = chain[i];
    unsigned long h = (unsigned long)pid;
    for (int j = 0; j < UP_DEPTH; j++) h = (h ^ ip[j]) * 0x9E3779B97F4A7C15ul;
    for (unsigned long n = 0; n < UP_CHAINS; n++) {
        struct up_chain *c = &up_chains[(h + n) & (UP_CHAINS - 1)];
        if (!c->count) {
            c->pid = pid;
            memcpy(c->ip, ip, sizeof ip);
        }
        if (c->pid == pid && !memcmp(c->ip, ip, sizeof ip)) {
            c->count++;
            return;
        }
    }
}

/* Kernel-mode samples of each function, callees included, by system call. */
#define UP_INCL (1 << 17)
struct up_incl { int pid; const char *name; const struct ksym *fn; unsigned long count; };
static struct up_incl up_incl[UP_INCL];
static volatile sig_atomic_t up_stop;
/* What the kernel announced while sampling (exec names, thread names,
 * executable mappings): a process that exits before the end is still
 * named. */
#define UP_COMMS 8192
struct up_comm { int pid, tid; char comm[16]; };
static struct up_comm up_comms[UP_COMMS];
static int up_ncomms;
#define UP_MMAPS 16384
struct up_mmap { int pid; unsigned long start, len, pgoff; char *file; };
static struct up_mmap up_mmaps[UP_MMAPS];
static int up_nmmaps;
static void up_on_signal(int sig) { (void)sig; up_stop = 1; }

/* Open addressing over the entries of a table: where (pid, key) is, or
 * `n` (the next free entry, recorded here) when it is not there yet. A
 * sample costs a hash, not a search of every thread or system call seen. */
#define UP_INDEX 32768
static int up_tid_index[UP_INDEX], up_sys_index[UP_INDEX]; /* entry + 1 */
static int up_tid_is(int i, int pid, unsigned long key)
{
    return up_tids[i].pid == pid && up_tids[i].tid == (int)key;
}
static int up_sys_is(int i, int pid, unsigned long key)
{
    return up_sys[i].pid == pid && (unsigned long)up_sys[i].name == key;
}
static int up_index(int *index, unsigned long h, int (*is)(int, int, unsigned long), int pid,
                    unsigned long key, int n, int cap)
{
    for (unsigned long k = 0; k < UP_INDEX; k++) {
        int *slot = &index[(h + k) & (UP_INDEX - 1)];
        if (!*slot) {
            if (n < cap) *slot = n + 1;
            return n;
        }
        if (is(*slot - 1, pid, key)) return *slot - 1;
    }
    return n;
}

static void up_count(int pid, int tid, unsigned long ip, int user)
{
    up_samples++;
    int t = up_index(up_tid_index, (unsigned long)pid * 0x9E3779B97F4A7C15ul ^ (unsigned)tid,
                     up_tid_is, pid, (unsigned long)tid, up_ntids, UP_TIDS);
    if (t == up_ntids && up_ntids < UP_TIDS) {
        up_tids[t].pid = pid;
        up_tids[t].tid = tid;
        up_ntids++;
    }
    if (t < up_ntids) {
        up_tids[t].n++;
        up_tids[t].user += user;
    }
    unsigned long h = (ip * 0x9E3779B97F4A7C15ul) ^ (unsigned long)pid * 0xC2B2AE3D27D4EB4Ful;
    for (unsigned long i = 0; i < UP_SLOTS; i++) {
        struct up_slot *s = &up_tab[(h + i) & (UP_SLOTS - 1)];
        if (s->count == 0) {
            s->pid = pid;
            s->ip = ip;
            s->user = user;
        }
        if (s->pid == pid && s->ip == ip) {
            s->count++;
            return;
        }
    }
    up_dropped++;
}

/* ksym_at for sampled addresses, which repeat: a direct-mapped cache of
 * the last function found at each. */
#define UP_KCACHE 65536
static struct { unsigned long ip; struct ksym *k; } up_kcache[UP_KCACHE];
static struct ksym *up_ksym(unsigned long ip)
{
    unsigned long slot = (ip ^ (ip >> 16)) & (UP_KCACHE - 1);
    if (up_kcache[slot].ip != ip || !up_kcache[slot].k) {
        up_kcache[slot].ip = ip;
        up_kcache[slot].k = ksym_at(up_ksyms, up_nksyms, ip);
    }
    return up_kcache[slot].k;
}

static void up_count_syscall(int pid, const unsigned long *chain, unsigned long nr)
{
    /* Outside a system call, the outermost frames say how the kernel was
     * entered: a page fault, an interrupt, a kernel thread's start, the
     * way back to user mode. */
    const char *name = "?", *outer = NULL;
    for (unsigned long i = nr; i-- > 0;) {
        if (chain[i] >= (unsigned long)-4095) continue; /* context markers */
        struct ksym *k = up_ksym(chain[i]);
        if (!k) continue;
        if (!outer) outer = k->name;
        if (k->kind == 1) {
            outer = NULL;
            name = k->name;
            break;
        }
        /* The dispatcher of kernels with the branch history fix may have
         * the __x64_sys_ wrapper inlined: the frame it calls names it. */
        if (k->kind == 2) {
            outer = NULL;
            name = "(inlined in x64_sys_call)";
            for (unsigned long j = i; j-- > 0;) {
                if (chain[j] >= (unsigned long)-4095) continue;
                struct ksym *in = up_ksym(chain[j]);
                if (in) name = in->name;
                break;
            }
            break;
        }
    }
    if (outer) {
        /* The outermost three frames, interned: "a<b<c" (c called b). */
        static char *interned[4096];
        static int ninterned;
        char buf[256];
        size_t used = 0;
        int depth = 0;
        buf[0] = 0;
        for (unsigned long i = nr; i-- > 0 && depth < 3;) {
            if (chain[i] >= (unsigned long)-4095) continue;
            struct ksym *k = up_ksym(chain[i]);
            if (!k) continue;
            used += snprintf(buf + used, sizeof buf - used, "%s%s", depth ? "<" : "", k->name);
            if (used >= sizeof buf) break;
            depth++;
        }
        static int index[8192]; /* interned + 1, by the string's hash */
        unsigned long h = 5381;
        for (const char *c = buf; *c; c++) h = h * 33 + (unsigned char)*c;
        name = NULL;
        for (unsigned long n = 0; n < 8192 && !name; n++) {
            int *slot = &index[(h + n) & 8191];
            if (!*slot) {
                if (ninterned < 4096) {
                    interned[ninterned] = strdup(buf);
                    *slot = ++ninterned;
                    name = interned[ninterned - 1];
                }
                break;
            }
            if (!strcmp(interned[*slot - 1], buf)) name = interned[*slot - 1];
        }
        if (!name) name = "?";
    }
    /* Inclusive: every function on the chain, once per sample (a function
     * repeated in a row, as recursion leaves it, counts once; a repeat
     * further up the chain is rare enough not to look for). */
    const struct ksym *prev = NULL;
    for (unsigned long i = 0; i < nr; i++) {
        if (chain[i] >= (unsigned long)-4095) continue;
        const struct ksym *k = up_ksym(chain[i]);
        if (!k || k == prev) continue;
        prev = k;
        unsigned long h = ((unsigned long)k * 0x9E3779B97F4A7C15ul) ^ ((unsigned long)name * 31) ^ (unsigned long)pid;
        for (unsigned long n = 0; n < UP_INCL; n++) {
            struct up_incl *e = &up_incl[(h + n) & (UP_INCL - 1)];
            if (!e->count) {
                e->pid = pid;
                e->name = name;
                e->fn = k;
            }
            if (e->pid == pid && e->name == name && e->fn == k) {
                e->count++;
                break;
            }
        }
    }
    int i = up_index(up_sys_index, (unsigned long)name * 0x9E3779B97F4A7C15ul ^ (unsigned)pid,
                     up_sys_is, pid, (unsigned long)name, up_nsys, UP_SYSCALLS);
    if (i == up_nsys) {
        if (up_nsys == UP_SYSCALLS) return;
        up_sys[i].pid = pid;
        up_sys[i].name = name;
        up_nsys++;
    }
    up_sys[i].count++;
}

/* Busy and idle samples of every CPU by 50 ms of CLOCK_BOOTTIME (the
 * timeline's clock), to see when the machine had CPU to spare. */
#define UP_BUCKET_NS 50000000ul
#define UP_BUCKETS 4096
static unsigned long up_bucket0, up_busy[UP_BUCKETS], up_idle[UP_BUCKETS];

static void up_count_time(unsigned long time, int busy)
{
    if (!time) return;
    if (!up_bucket0) up_bucket0 = time - time % UP_BUCKET_NS;
    if (time < up_bucket0) return;
    unsigned long b = (time - up_bucket0) / UP_BUCKET_NS;
    if (b >= UP_BUCKETS) return;
    if (busy) up_busy[b]++;
    else up_idle[b]++;
}

/* Off-CPU: every few milliseconds, the kernel stack of each thread of a
 * process named "uevd" that sleeps uninterruptibly (state D: a mutex, a
 * rwsem, a page lock, I/O), counted by its 50 ms bucket and its frames.
 * What cpu-clock samples cannot show: where threads waited while a CPU
 * was idle. */
#define UP_WAITS 4096
static int up_offcpu;
static struct up_wait { unsigned long bucket, count; char *stack; } up_waits[UP_WAITS];
static int up_nwaits;
static int up_uevd_pids[16], up_nuevd;
static unsigned long up_offcpu_polls;

static void up_find_uevd(void)
{
    DIR *d = opendir("/proc");
    if (!d) return;
    struct dirent *e;
    up_nuevd = 0;
    char path[300], comm[32];
    while ((e = readdir(d)) && up_nuevd < 16) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/comm", e->d_name);
        if (!read_file(path, comm, sizeof comm) && !strcmp(comm, "uevd\n"))
            up_uevd_pids[up_nuevd++] = atoi(e->d_name);
    }
    closedir(d);
}

static void up_poll_waits(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    unsigned long now = ts.tv_sec * 1000000000ul + ts.tv_nsec;
    if (up_offcpu_polls++ % 20 == 0) up_find_uevd();
    char path[320], buf[4096];
    for (int i = 0; i < up_nuevd; i++) {
        snprintf(path, sizeof path, "/proc/%d/task", up_uevd_pids[i]);
        DIR *d = opendir(path);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
            snprintf(path, sizeof path, "/proc/%d/task/%s/stat", up_uevd_pids[i], e->d_name);
            if (read_file(path, buf, sizeof buf)) continue;
            char *r = strrchr(buf, ')');
            if (!r || r[1] != ' ' || r[2] != 'D') continue;
            snprintf(path, sizeof path, "/proc/%d/task/%s/stack", up_uevd_pids[i], e->d_name);
            if (read_file(path, buf, sizeof buf)) continue;
            /* "[<0>] name+0x1/0x2" lines: keep the names, innermost first. */
            char stack[512] = "", *line = buf;
            size_t used = 0;
            for (int depth = 0; line && *line && depth < 12; depth++) {
                char *nl = strchr(line, '\n');
                if (nl) *nl = 0;
                char *name = strchr(line, ' ');
                if (name) {
                    name++;
                    size_t n = strcspn(name, "+");
                    if (used + n + 2 < sizeof stack) {
                        if (used) stack[used++] = '<';
                        memcpy(stack + used, name, n);
                        used += n;
                        stack[used] = 0;
                    }
                }
                line = nl ? nl + 1 : NULL;
            }
            unsigned long bucket = now - now % UP_BUCKET_NS;
            int k;
            for (k = 0; k < up_nwaits; k++)
                if (up_waits[k].bucket == bucket && !strcmp(up_waits[k].stack, stack)) break;
            if (k == up_nwaits) {
                if (up_nwaits == UP_WAITS) continue;
                up_waits[k].bucket = bucket;
                up_waits[k].stack = strdup(stack);
                up_nwaits++;
            }
            up_waits[k].count++;
        }
        closedir(d);
    }
}

static void up_drain(struct perf_event_mmap_page *mp, long page)
{
    unsigned char *data = (unsigned char *)mp + page;
    unsigned long size = UP_PAGES * page;
    unsigned long head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
    unsigned long tail = mp->data_tail;
    static unsigned char rec[4096];
    while (tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header hdr;
        for (unsigned i = 0; i < sizeof hdr; i++)
            ((unsigned char *)&hdr)[i] = data[(tail + i) & (size - 1)];
        if (hdr.size < sizeof hdr || tail + hdr.size > head) break;
        unsigned len = hdr.size < sizeof rec ? hdr.size : sizeof rec;
        for (unsigned i = 0; i < len; i++)
            rec[i] = data[(tail + i) & (size - 1)];
        if (hdr.type == PERF_RECORD_SAMPLE && len >= sizeof hdr + 16) {
            unsigned long ip, time = 0;
            unsigned int pid, tid;
            memcpy(&ip, rec + sizeof hdr, 8);
            memcpy(&pid, rec + sizeof hdr + 8, 4);
            memcpy(&tid, rec + sizeof hdr + 12, 4);
            if (len >= sizeof hdr + 24) memcpy(&time, rec + sizeof hdr + 16, 8);
            int user = (hdr.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER;
            up_count_time(time, pid != 0);
            if (pid) /* not the idle task */
                up_count(pid, tid, ip, user);
            unsigned long nr = 0;
            if (len >= sizeof hdr + 32) memcpy(&nr, rec + sizeof hdr + 24, 8);
            if (pid && !user && up_ksyms && len >= sizeof hdr + 32 + nr * 8)
                up_count_syscall(pid, (const unsigned long *)(rec + sizeof hdr + 32), nr);
            if (pid && user && up_callers && len >= sizeof hdr + 32 + nr * 8)
                up_count_chain(pid, (const unsigned long *)(rec + sizeof hdr + 32), nr);
        } else if (hdr.type == PERF_RECORD_COMM && len > sizeof hdr + 8) {
            unsigned int pid, tid;
            memcpy(&pid, rec + sizeof hdr, 4);
            memcpy(&tid, rec + sizeof hdr + 4, 4);
            int i;
            for (i = 0; i < up_ncomms; i++)
                if (up_comms[i].pid == (int)pid && up_comms[i].tid == (int)tid) break;
            if (i == up_ncomms && up_ncomms < UP_COMMS) up_ncomms++;
            if (i < up_ncomms) {
                up_comms[i].pid = pid;
                up_comms[i].tid = tid;
                snprintf(up_comms[i].comm, sizeof up_comms[i].comm, "%.*s",
                         (int)(len - sizeof hdr - 8), (const char *)rec + sizeof hdr + 8);
            }
        } else if (hdr.type == PERF_RECORD_MMAP && len > sizeof hdr + 32 && up_nmmaps < UP_MMAPS) {
            struct up_mmap *m = &up_mmaps[up_nmmaps++];
            unsigned int pid;
            memcpy(&pid, rec + sizeof hdr, 4);
            m->pid = pid;
            memcpy(&m->start, rec + sizeof hdr + 8, 8);
            memcpy(&m->len, rec + sizeof hdr + 16, 8);
            memcpy(&m->pgoff, rec + sizeof hdr + 24, 8);
            m->file = strndup((const char *)rec + sizeof hdr + 32, len - sizeof hdr - 32);
        } else if (hdr.type == PERF_RECORD_LOST && len >= sizeof hdr + 16) {
            unsigned long lost;
            memcpy(&lost, rec + sizeof hdr + 8, 8);
            up_lost += lost;
        }
        tail += hdr.size;
    }
    __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

static int up_cmp(const void *a, const void *b)
{
    const struct up_slot *x = a, *y = b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    return x->ip < y->ip ? -1 : x->ip > y->ip;
}

static int uprofile(const char *out, long period_ns)
{
    long page = sysconf(_SC_PAGESIZE);
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1 || ncpu > 64) ncpu = 1;
    int fds[64];
    struct perf_event_mmap_page *rings[64];
    unsigned long stext;
    /* Named before sampling starts: reading kallsyms is kernel work too. */
    up_ksyms = load_ksyms(&up_nksyms, &stext);
    for (int c = 0; c < ncpu; c++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.type = PERF_TYPE_SOFTWARE;
        a.size = sizeof a;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.sample_period = period_ns;
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
        a.use_clockid = 1;
        a.clockid = CLOCK_BOOTTIME;
        a.exclude_callchain_user = !up_callers;
        a.sample_max_stack = 64;
        a.comm = 1;
        a.mmap = 1;
        fds[c] = syscall(SYS_perf_event_open, &a, -1, c, -1, PERF_FLAG_FD_CLOEXEC);
        if (fds[c] < 0) { perror("perf_event_open"); return 1; }
        rings[c] = mmap(NULL, (UP_PAGES + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fds[c], 0);
        if (rings[c] == MAP_FAILED) { perror("mmap perf ring"); return 1; }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = up_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* Started: whoever waits for the sampler to run may go on. */
    printf("sampling\n");
    fflush(stdout);
    struct timespec nap = { 0, 20 * 1000 * 1000 }, short_nap = { 0, 5 * 1000 * 1000 };
    unsigned long round = 0;
    while (!up_stop) {
        if (!up_offcpu || round % 4 == 0)
            for (int c = 0; c < ncpu; c++) up_drain(rings[c], page);
        if (up_offcpu) up_poll_waits();
        round++;
        nanosleep(up_offcpu ? &short_nap : &nap, NULL);
    }
    for (int c = 0; c < ncpu; c++) {
        ioctl(fds[c], PERF_EVENT_IOC_DISABLE, 0);
        up_drain(rings[c], page);
    }
    FILE *f = fopen(out, "we");
    if (!f) { perror(out); return 1; }
    fprintf(f, "s %lu %lu %ld\n", up_samples, up_lost + up_dropped, period_ns);
    char path[64], comm[64];
    for (int t = 0; t < up_ntids; t++) {
        snprintf(path, sizeof path, "/proc/%d/task/%d/comm", up_tids[t].pid, up_tids[t].tid);
        if (read_file(path, comm, sizeof comm)) {
            /* Gone: the name the kernel last announced for the thread,
             * else for its process. */
            strcpy(comm, "?");
            for (int pass = 0; pass < 2 && !strcmp(comm, "?"); pass++)
                for (int i = 0; i < up_ncomms; i++)
                    if (up_comms[i].pid == up_tids[t].pid &&
                        up_comms[i].tid == (pass ? up_tids[t].pid : up_tids[t].tid))
                        snprintf(comm, sizeof comm, "%s", up_comms[i].comm);
        }
        comm[strcspn(comm, "\n")] = 0;
        for (char *p = comm; *p; p++) if (*p == ' ') *p = '_';
        fprintf(f, "t %d %d %lu %lu %s\n", up_tids[t].pid, up_tids[t].tid,
                up_tids[t].n, up_tids[t].user, comm);
    }
    size_t n = 0;
    for (size_t i = 0; i < UP_SLOTS; i++)
        if (up_tab[i].count) up_tab[n++] = up_tab[i];
    qsort(up_tab, n, sizeof *up_tab, up_cmp);
    for (int b = 0; b < UP_BUCKETS; b++)
        if (up_busy[b] || up_idle[b])
            fprintf(f, "q %lu %lu %lu\n", up_bucket0 + b * UP_BUCKET_NS, up_busy[b], up_idle[b]);
    for (int i = 0; i < up_nwaits; i++)
        fprintf(f, "w %lu %lu %s\n", up_waits[i].bucket, up_waits[i].count, up_waits[i].stack);
    for (int i = 0; i < up_nsys; i++)
        fprintf(f, "y %d %lu %s\n", up_sys[i].pid, up_sys[i].count, up_sys[i].name);
    for (int i = 0; i < UP_CHAINS; i++) {
        if (!up_chains[i].count) continue;
        fprintf(f, "c %d %lu", up_chains[i].pid, up_chains[i].count);
        for (int j = 0; j < UP_DEPTH; j++) fprintf(f, " %lx", up_chains[i].ip[j]);
        fputc('\n', f);
    }
    for (int i = 0; i < UP_INCL; i++)
        if (up_incl[i].count)
            fprintf(f, "i %d %lu %s %s\n", up_incl[i].pid, up_incl[i].count, up_incl[i].name,
                    up_incl[i].fn->name);
    size_t nk = up_nksyms;
    struct ksym *ks = up_ksyms;
    for (size_t i = 0; i < n; i++) {
        if (up_tab[i].user) {
            fprintf(f, "u %d %lx %lu\n", up_tab[i].pid, up_tab[i].ip, up_tab[i].count);
            continue;
        }
        struct ksym *k = ks ? ksym_at(ks, nk, up_tab[i].ip) : NULL;
        fprintf(f, "k %d %lu %s\n", up_tab[i].pid, up_tab[i].count, k ? k->name : "?");
    }
    int last = 0;
    for (size_t i = 0; i < n; i++) {
        if (up_tab[i].pid == last) continue;
        last = up_tab[i].pid;
        snprintf(path, sizeof path, "/proc/%d/maps", last);
        FILE *m = fopen(path, "re");
        if (!m) {
            for (int j = 0; j < up_nmmaps; j++)
                if (up_mmaps[j].pid == last && up_mmaps[j].file[0] == '/')
                    fprintf(f, "m %d %lx %lx %lx %s\n", last, up_mmaps[j].start,
                            up_mmaps[j].start + up_mmaps[j].len, up_mmaps[j].pgoff, up_mmaps[j].file);
            continue;
        }
        char line[512], perms[8], file[400];
        unsigned long lo, hi, off;
        while (fgets(line, sizeof line, m)) {
            file[0] = 0;
            if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %399s", &lo, &hi, perms, &off, file) < 4) continue;
            if (perms[2] == 'x' && file[0])
                fprintf(f, "m %d %lx %lx %lx %s\n", last, lo, hi, off, file);
        }
        fclose(m);
    }
    return fclose(f) ? 1 : 0;
}

/* ---- labtool insmod ---- */
#define MAXMOD 8192
struct mod {
    char name[64];
    char path[256];
    int deps[32], ndeps;
    int wanted;
    int state;  /* 0 waiting, 1 in, 2 failed */
};
static struct mod mods[MAXMOD];
static int nmod;
static const char *moddir;
static pthread_mutex_t mod_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mod_cond = PTHREAD_COND_INITIALIZER;
static int n_inserted, n_failed, n_loaded;
static int jobs_free = MAXMOD;

/* "kernel/drivers/virtio/virtio_pci.ko" -> "virtio_pci" */
static void mod_name(const char *path, char *out, size_t len)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t i = 0;
    for (; b[i] && b[i] != '.' && i + 1 < len; i++)
        out[i] = b[i] == '-' ? '_' : b[i];
    out[i] = 0;
}

/* Names to indexes: modules.dep has thousands of lines, and a linear
 * search per dependency made the floor's own start quadratic. */
#define HASHSZ (MAXMOD * 2)
static int mod_hash[HASHSZ]; /* index + 1, 0 empty */

static unsigned hash_name(const char *s)
{
    unsigned h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h % HASHSZ;
}

static int mod_find(const char *name)
{
    for (unsigned h = hash_name(name); mod_hash[h]; h = (h + 1) % HASHSZ)
        if (!strcmp(mods[mod_hash[h] - 1].name, name))
            return mod_hash[h] - 1;
    return -1;
}

static int mod_add(const char *path)
{
    char name[64];
    mod_name(path, name, sizeof name);
    int i = mod_find(name);
    if (i >= 0 || nmod == MAXMOD)
        return i;
    i = nmod++;
    snprintf(mods[i].name, sizeof mods[i].name, "%s", name);
    snprintf(mods[i].path, sizeof mods[i].path, "%s", path);
    unsigned h = hash_name(mods[i].name);
    while (mod_hash[h])
        h = (h + 1) % HASHSZ;
    mod_hash[h] = i + 1;
    return i;
}

static int read_moddep(void)
{
    char p[512];
    snprintf(p, sizeof p, "%s/modules.dep", moddir);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    static char line[8192];
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        *colon = 0;
        int m = mod_add(line);
        if (m < 0) continue;
        mods[m].ndeps = 0;
        for (char *t = strtok(colon + 1, " \n"); t; t = strtok(NULL, " \n"))
            if (mods[m].ndeps < 32)
                mods[m].deps[mods[m].ndeps++] = mod_add(t);
    }
    fclose(f);
    return 0;
}

static void want(int m)
{
    if (m < 0 || mods[m].wanted) return;
    mods[m].wanted = 1;
    for (int i = 0; i < mods[m].ndeps; i++)
        want(mods[m].deps[i]);
}

static void *insert_one(void *arg)
{
    struct mod *m = arg;
    pthread_mutex_lock(&mod_lock);
    for (;;) {
        int ready = 1;
        for (int i = 0; i < m->ndeps; i++)
            if (m->deps[i] >= 0 && mods[m->deps[i]].state == 0)
                ready = 0;
        if (ready && jobs_free > 0) break;
        pthread_cond_wait(&mod_cond, &mod_lock);
    }
    jobs_free--;
    pthread_mutex_unlock(&mod_lock);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", moddir, m->path);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && (syscall(SYS_finit_module, fd, "", 0) == 0 || errno == EEXIST);
    if (fd >= 0) close(fd);
    if (!ok) fprintf(stderr, "labtool insmod: %s: %s\n", m->name, strerror(errno));
    pthread_mutex_lock(&mod_lock);
    m->state = ok ? 1 : 2;
    jobs_free++;
    if (ok) n_inserted++; else n_failed++;
    pthread_cond_broadcast(&mod_cond);
    pthread_mutex_unlock(&mod_lock);
    return NULL;
}

static int insmod_all(const char *dir, const char *list, int jobs)
{
    moddir = dir;
    if (jobs > 0) jobs_free = jobs;
    if (read_moddep()) { perror("modules.dep"); return 1; }
    FILE *f = fopen(list, "r");
    if (!f) { perror(list); return 1; }
    char name[128];
    while (fscanf(f, "%127s", name) == 1) {
        int m = mod_find(name);
        if (m < 0) fprintf(stderr, "labtool insmod: %s: not in modules.dep\n", name);
        want(m);
    }
    fclose(f);
    static pthread_t th[MAXMOD];
    int nth = 0;
    for (int i = 0; i < nmod; i++) {
        if (!mods[i].wanted) continue;
        char p[128];
        snprintf(p, sizeof p, "/sys/module/%.63s", mods[i].name);
        if (access(p, F_OK) == 0) {  /* in already (or built in) */
            mods[i].state = 1;
            n_loaded++;
        }
    }
    for (int i = 0; i < nmod; i++)
        if (mods[i].wanted && mods[i].state == 0)
            if (pthread_create(&th[nth], NULL, insert_one, &mods[i]) == 0)
                nth++;
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    printf("inserted=%d failed=%d loaded=%d\n", n_inserted, n_failed, n_loaded);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "insmod"))
        return insmod_all(argv[2], argv[3], argc >= 5 ? atoi(argv[4]) : 0);
    if (argc >= 3 && !strcmp(argv[1], "devstat")) {
        devwalk(argv[2], "", 0);
        printf("nodes=%ld blk=%ld chr=%ld links=%ld dirs=%ld other=%ld\n",
               c_blk + c_chr, c_blk, c_chr, c_lnk, c_dir, c_oth);
        for (int i = 0; i < nld; i++)
            printf("links.%s=%ld\n", ldir[i], lcnt[i]);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "dump")) {
        devwalk(argv[2], "", 1);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "cat"))
        return catdir(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "now")) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        printf("%lld.%06ld\n", (long long)ts.tv_sec, ts.tv_nsec / 1000);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "clock")) {
        struct timespec a, b, t;
        const int n = 20000;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < n; i++) clock_gettime(CLOCK_BOOTTIME, &t);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
        printf("clock_ns=%.0f\n", ns / n);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "hz")) {
        printf("%ld\n", sysconf(_SC_CLK_TCK));
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "cpu")) {
        char buf[512];
        if (read_file("/proc/stat", buf, sizeof buf)) return 1;
        unsigned long long v[10] = {0};
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
               &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
        unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        printf("busy=%llu total=%llu\n", busy, busy + v[3] + v[4]);
        return 0;
    }
    if (argc >= 4 && !strcmp(argv[1], "walk")) {
        int w = !strcmp(argv[2], "write");
        if (argc >= 5) action = argv[4];
        int fd = open(argv[3], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) { perror(argv[3]); return 1; }
        walk(fd, w);
        printf("files=%ld errors=%ld\n", n_files, n_err);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "tree"))
        return tree(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "kprofile"))
        return kprofile();
    if (argc >= 3 && !strcmp(argv[1], "uprofile")) {
        for (int i = 4; i < argc; i++) {
            up_callers |= !strcmp(argv[i], "callers");
            up_offcpu |= !strcmp(argv[i], "offcpu");
        }
        return uprofile(argv[2], argc >= 4 ? atol(argv[3]) : 500000);
    }
    if (argc >= 4 && !strcmp(argv[1], "waitfile")) {
        /* Polls every 5 ms, cheaper than any shell loop under TCG; prints
         * the CLOCK_MONOTONIC time (as "now" does) when PATH first
         * exists. */
        struct timespec ts, nap = { 0, 5 * 1000 * 1000 };
        long rounds = atol(argv[3]) * 200;
        struct stat st;
        for (long i = 0; i <= rounds; i++) {
            if (stat(argv[2], &st) == 0) {
                clock_gettime(CLOCK_MONOTONIC, &ts);
                printf("%lld.%06ld\n", (long long)ts.tv_sec, ts.tv_nsec / 1000);
                return 0;
            }
            nanosleep(&nap, NULL);
        }
        return 1;
    }
    fprintf(stderr, "usage: labtool now|hz|clock|cpu|walk read|write DIR [ACTION]|tree PID...|kprofile|uprofile OUT [PERIOD_NS [callers]]|waitfile PATH SECONDS|devstat DIR|dump DIR|cat DIR\n");
    return 2;
}
