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
 * Symlinks are never followed in walks, so each sysfs object is visited once.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
struct ksym { unsigned long addr; char *name; unsigned long hits; };
static int ksym_cmp(const void *a, const void *b)
{
    const struct ksym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
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
    FILE *ks = fopen("/proc/kallsyms", "re");
    if (!ks) { perror("/proc/kallsyms"); return 1; }
    size_t n = 0, cap = 1 << 16;
    struct ksym *sym = malloc(cap * sizeof *sym);
    unsigned long stext = 0;
    char line[512], name[256], type;
    unsigned long addr;
    while (sym && fgets(line, sizeof line, ks)) {
        if (sscanf(line, "%lx %c %255s", &addr, &type, name) != 3) continue;
        if (type != 't' && type != 'T') continue;
        if (!strcmp(name, "_stext")) stext = addr;
        if (n == cap) sym = realloc(sym, (cap *= 2) * sizeof *sym);
        if (!sym) break;
        sym[n].addr = addr;
        sym[n].name = strdup(name);
        sym[n].hits = 0;
        n++;
    }
    fclose(ks);
    if (!sym || !stext) {
        fprintf(stderr, "kprofile: no _stext in /proc/kallsyms (addresses hidden?)\n");
        return 1;
    }
    qsort(sym, n, sizeof *sym, ksym_cmp);
    unsigned long step = prof[0], unknown = 0;
    for (size_t slot = 0; slot + 1 < plen; slot++) {
        unsigned int h = prof[slot + 1];
        if (!h) continue;
        unsigned long pc = stext + slot * step;
        size_t lo = 0, hi = n;
        while (hi - lo > 1) {
            size_t mid = (lo + hi) / 2;
            if (sym[mid].addr <= pc) lo = mid; else hi = mid;
        }
        if (sym[lo].addr <= pc) sym[lo].hits += h; else unknown += h;
    }
    for (size_t i = 0; i < n; i++)
        if (sym[i].hits) printf("%lu %s\n", sym[i].hits, sym[i].name);
    if (unknown) printf("%lu ?\n", unknown);
    return 0;
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
    fprintf(stderr, "usage: labtool now|hz|clock|cpu|walk read|write DIR [ACTION]|tree PID...|kprofile|waitfile PATH SECONDS|devstat DIR|dump DIR|cat DIR\n");
    return 2;
}
