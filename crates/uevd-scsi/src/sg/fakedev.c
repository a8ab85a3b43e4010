/* An LD_PRELOAD stand-in for the kernel's answers to ioctl() on fake
 * device nodes: regular files below $UEVD_FAKEDEV_DIR whose content is a
 * script (see script.rs for the format). Every other descriptor goes to
 * the real ioctl().
 *
 * Used to run udev's scsi_id, ata_id and cdrom_id and uevd's emulations
 * of them against the same devices on machines without SCSI hardware.
 * Each request is logged to $UEVD_FAKEDEV_LOG (if set), one line each, in
 * the form script.rs's log_* functions write. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bsg.h>
#include <scsi/sg.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct rec {
        uint32_t kind, request, prefix_len;
        uint8_t prefix[16];
        int32_t err, ret;
        uint32_t status, host, driver;
        int32_t resid;
        uint32_t resid_set, sense_len, data_len;
};

static int (*real_ioctl)(int, unsigned long, void *);

static int fake_path(int fd, char *path, size_t size) {
        const char *dir = getenv("UEVD_FAKEDEV_DIR");
        char link[64];
        ssize_t n;

        if (!dir || !*dir)
                return 0;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, path, size - 1);
        if (n <= 0)
                return 0;
        path[n] = '\0';
        return strncmp(path, dir, strlen(dir)) == 0;
}

static char *slurp(const char *path, size_t *len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t cap = 1 << 16, n = 0;
        char *buf;

        if (fd < 0)
                return NULL;
        buf = malloc(cap);
        for (;;) {
                ssize_t r;
                if (n == cap)
                        buf = realloc(buf, cap *= 2);
                r = read(fd, buf + n, cap - n);
                if (r <= 0)
                        break;
                n += r;
        }
        close(fd);
        *len = n;
        return buf;
}

static void logline(const char *fmt, ...) {
        const char *path = getenv("UEVD_FAKEDEV_LOG");
        char line[512];
        va_list ap;
        int fd, n;

        if (!path || !*path)
                return;
        va_start(ap, fmt);
        n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if (n > (int) sizeof(line) - 2)
                n = sizeof(line) - 2;
        line[n++] = '\n';
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return;
        (void) !write(fd, line, n);
        close(fd);
}

static void hex(char *out, const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n && i < 32; i++)
                sprintf(out + 2 * i, "%02x", p[i]);
        out[2 * (n < 32 ? n : 32)] = '\0';
}

/* The first record answering this request, or NULL. */
static const struct rec *find(const char *s, size_t len, uint32_t kind, uint32_t request,
                              const uint8_t *cdb, size_t cdb_len,
                              const uint8_t **sense, const uint8_t **data) {
        size_t off = 8;

        if (len < 8 || memcmp(s, "UEVDFAKE", 8) != 0)
                return NULL;
        while (off + sizeof(struct rec) <= len) {
                static struct rec r;
                memcpy(&r, s + off, sizeof(r));
                off += sizeof(r);
                if (off + r.sense_len + r.data_len > len)
                        return NULL;
                *sense = (const uint8_t *) s + off;
                *data = (const uint8_t *) s + off + r.sense_len;
                off += r.sense_len + r.data_len;
                if (r.kind != kind)
                        continue;
                if (kind == 3 ? r.request == request
                              : (r.prefix_len <= cdb_len && memcmp(r.prefix, cdb, r.prefix_len) == 0))
                        return &r;
        }
        return NULL;
}

static int fake(int fd, const char *path, unsigned long request, void *arg) {
        size_t len = 0;
        char *s = slurp(path, &len);
        const uint8_t *sense = NULL, *data = NULL;
        const struct rec *r;
        char cdbhex[65];
        int ret = -1, err = ENOTTY;

        (void) fd;
        if (!s)
                return errno = EIO, -1;

        if (request == SG_IO && arg && *(int *) arg == 'S') {
                struct sg_io_hdr *h = arg;
                const char *dir = h->dxfer_direction == SG_DXFER_FROM_DEV && h->dxfer_len > 0 ? "in" : "none";
                hex(cdbhex, h->cmdp, h->cmd_len);
                logline("v3 %s len=%u dir=%s to=%u fl=%u sb=%u", cdbhex, h->dxfer_len, dir,
                        h->timeout, h->flags, h->mx_sb_len);
                r = find(s, len, 1, 0, h->cmdp, h->cmd_len, &sense, &data);
                if (r && r->err)
                        err = r->err;
                else if (r) {
                        uint32_t n = r->data_len < h->dxfer_len ? r->data_len : h->dxfer_len;
                        uint32_t sn = r->sense_len < h->mx_sb_len ? r->sense_len : h->mx_sb_len;
                        if (h->dxfer_direction == SG_DXFER_FROM_DEV && h->dxferp)
                                memcpy(h->dxferp, data, n);
                        else
                                n = 0;
                        if (h->sbp)
                                memcpy(h->sbp, sense, sn);
                        h->status = r->status;
                        h->masked_status = (r->status >> 1) & 0x7f;
                        h->msg_status = 0;
                        h->sb_len_wr = sn;
                        h->host_status = r->host;
                        h->driver_status = r->driver;
                        h->resid = r->resid_set ? r->resid : (int) (h->dxfer_len - n);
                        h->duration = 0;
                        h->info = (r->status || r->host || r->driver) ? SG_INFO_CHECK : 0;
                        ret = 0;
                }
        } else if (request == SG_IO && arg && *(int *) arg == 'Q') {
                struct sg_io_v4 *h = arg;
                const uint8_t *cdb = (const uint8_t *) (uintptr_t) h->request;
                hex(cdbhex, cdb, h->request_len);
                logline("v4 %s len=%u to=%u rsp=%u", cdbhex, h->din_xfer_len, h->timeout,
                        h->max_response_len);
                r = find(s, len, 2, 0, cdb, h->request_len, &sense, &data);
                if (r && r->err)
                        err = r->err;
                else if (r) {
                        uint32_t n = r->data_len < h->din_xfer_len ? r->data_len : h->din_xfer_len;
                        uint32_t sn = r->sense_len < h->max_response_len ? r->sense_len : h->max_response_len;
                        memcpy((void *) (uintptr_t) h->din_xferp, data, n);
                        memcpy((void *) (uintptr_t) h->response, sense, sn);
                        h->device_status = r->status;
                        h->transport_status = r->host;
                        h->driver_status = r->driver;
                        h->response_len = sn;
                        h->din_resid = r->resid_set ? r->resid : (int) (h->din_xfer_len - n);
                        h->info = (r->status || r->host || r->driver) ? SG_INFO_CHECK : 0;
                        ret = 0;
                }
        } else {
                int by_value = request == 0x5331 || request == 0x5326 || request == 0x5321 || request == 0x5329;
                if (by_value)
                        logline("ioctl 0x%lx arg=0x%lx", request, (unsigned long) (uintptr_t) arg);
                else
                        logline("ioctl 0x%lx arg=ptr", request);
                r = find(s, len, 3, request, NULL, 0, &sense, &data);
                if (r && r->err)
                        err = r->err;
                else if (r) {
                        if (r->data_len && arg && !by_value)
                                memcpy(arg, data, r->data_len);
                        ret = r->ret;
                }
        }
        free(s);
        if (ret < 0)
                errno = err;
        return ret;
}

int ioctl(int fd, unsigned long request, ...) {
        char path[4096];
        va_list ap;
        void *arg;

        va_start(ap, request);
        arg = va_arg(ap, void *);
        va_end(ap);
        if (!real_ioctl)
                real_ioctl = (int (*)(int, unsigned long, void *)) dlsym(RTLD_NEXT, "ioctl");
        if (!fake_path(fd, path, sizeof(path)))
                return real_ioctl(fd, request, arg);
        return fake(fd, path, request, arg);
}
