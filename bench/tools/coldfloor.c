/* coldfloor: the floor under a cold disk hit (issue 21), as relay.c is under a miss.
 *
 *   coldfloor PORT FILE BLOCK_SIZE   (bytes, or KiB with a k: 64k)
 *
 * One thread of level-triggered epoll. Each request head (anything ending in an empty line)
 * on a keep-alive connection is answered with BLOCK_SIZE bytes read from FILE with O_DIRECT
 * (Linux AIO, as fio's libaio engine, completions signalled through an eventfd in the same
 * epoll; the reads a turn of the loop found are submitted together in one io_submit), then
 * checked with CRC32C (three streams of the SSE4.2 instruction, as the crc32c crate), then
 * sent with one writev of a fixed head and the block. Request k reads block
 * (k * 7919) mod (file size / BLOCK_SIZE): every block once per pass over the file (the
 * final line says whether a run wrapped), scattered over it, as bench/tools/disk_once.lua
 * asks Sepia for its objects. Pipelined requests are answered in turn. No cache, no index, no
 * parsing beyond the empty line, no log: what any server pays to send a checksummed block
 * it reads from the device, on this kernel. A read buffer per connection, used again (the
 * pages stay mapped, as Sepia's pooled buffers and fio's). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nmmintrin.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 256
#define IN_CAP 4096

struct conn {
    int fd;
    int reading;  /* a read of the device is in flight */
    int dead;     /* the client went: freed at the end of a turn once no read is in flight */
    struct conn *next_dead;
    size_t in_len;
    char in[IN_CAP];
    unsigned char *block;
    size_t sent;  /* bytes of head + block written so far */
    struct iocb cb;
};

static int ep, efd, file_fd;
/* Connections dropped and not freed yet: nothing is freed during a turn, since a later event
 * of the same turn may still name it. */
static struct conn *graveyard;
/* This turn's reads, submitted together at its end. */
#define MAX_PENDING 4096
static struct iocb *pending[MAX_PENDING];
static int np;
static aio_context_t ctx;
static size_t bs;
static uint64_t blocks, next_k;
static volatile uint32_t crc_sink;
static char head[128];
static size_t head_len;

/* COLDFLOOR_BUFS=region: the read buffers are slots of one region allocated and written
 * through at the start (as fio's buffers are: one allocation for its whole depth); =huge:
 * the same region advised into transparent huge pages. Default: one allocation per
 * connection, faulted in by its first read. */
#define REGION_SLOTS 256
static unsigned char *region;
static int free_slots[REGION_SLOTS], nfree;

static void region_init(const char *kind) {
    size_t len = (REGION_SLOTS * bs + (2 << 20) - 1) & ~(size_t)((2 << 20) - 1);
    unsigned char *map = mmap(NULL, len + (2 << 20), PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    region = (unsigned char *)(((uintptr_t)map + (2 << 20) - 1) & ~(uintptr_t)((2 << 20) - 1));
    madvise(region, len, strcmp(kind, "huge") == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(region, 1, len);
    for (int i = REGION_SLOTS - 1; i >= 0; i--) free_slots[nfree++] = i;
}

static unsigned char *block_alloc(void) {
    if (!region) {
        void *p;
        return posix_memalign(&p, 4096, bs) ? NULL : p;
    }
    return nfree ? region + (size_t)free_slots[--nfree] * bs : NULL;
}

static void block_free(unsigned char *b) {
    if (!region) free(b);
    else free_slots[nfree++] = (int)((size_t)(b - region) / bs);
}

/* Reads submitted and not yet reaped, averaged over time (printed at the end): how many of
 * the clients' 64 requests the server kept in the kernel's hands, against fio's constant
 * depth (the rest were on their way: answers sent, requests not yet read). */
static long in_flight;
static double in_flight_area, area_from, area_last;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void in_flight_add(long d) {
    double t = now_s();
    if (area_from == 0) area_from = t;
    else in_flight_area += (double)in_flight * (t - area_last);
    area_last = t;
    in_flight += d;
}

/* COLDFLOOR_ORDER=random: blocks drawn at random (a xorshift generator), as fio's
 * randread; default: the stride disk_once.lua asks Sepia's objects in. */
static int random_order;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_block(void) {
    if (!random_order) return (next_k++ * 7919) % blocks;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % blocks;
}

static long write_waits, responses;
static int sndbuf;

static volatile sig_atomic_t stopping;

static void on_term(int sig) {
    (void)sig;
    stopping = 1;  /* epoll_wait returns EINTR: the loop ends there */
}

static void finish(void) {
    double span = area_last - area_from;
    /* One line that bench/disk.sh reads: wrapped=1 means some blocks were read twice (the
     * run asked for more blocks than the file has). */
    fprintf(stderr, "coldfloor: in_flight=%.1f responses=%ld blocks=%llu wrapped=%d "
            "write_waits=%ld\n", span > 0 ? in_flight_area / span : 0.0, responses,
            (unsigned long long)blocks, next_k > blocks, write_waits);
    exit(0);  /* stopped by the bench: a clean end */
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* CRC32C of `p`: three interleaved streams, so that the instruction's latency overlaps; the
 * three values are folded together by XOR (a floor needs the pass over the bytes, not the
 * combination step, which is a few multiplications). */
__attribute__((target("sse4.2"))) static uint32_t crc3(const unsigned char *p, size_t n) {
    size_t third = (n / 24) * 8, i;
    uint64_t a = ~0u, b = ~0u, c = ~0u, w;
    const unsigned char *q = p + third, *r = p + 2 * third;
    for (i = 0; i < third; i += 8) {
        memcpy(&w, p + i, 8); a = _mm_crc32_u64(a, w);
        memcpy(&w, q + i, 8); b = _mm_crc32_u64(b, w);
        memcpy(&w, r + i, 8); c = _mm_crc32_u64(c, w);
    }
    for (i = 3 * third; i < n; i++) a = _mm_crc32_u8((uint32_t)a, p[i]);
    return (uint32_t)(a ^ b ^ c);
}

static void watch(struct conn *c, uint32_t events, int op) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, op, c->fd, &ev) < 0) die("epoll_ctl");
}

static void drop_conn(struct conn *c) {
    if (c->dead) return;
    close(c->fd);
    c->dead = 1;
    c->next_dead = graveyard;
    graveyard = c;
}

/* At the end of a turn: frees the dropped connections whose read (if any) has completed. */
static void bury(void) {
    struct conn **at = &graveyard;
    while (*at) {
        struct conn *c = *at;
        if (c->reading) {  /* the kernel still writes its block */
            at = &c->next_dead;
            continue;
        }
        *at = c->next_dead;
        block_free(c->block);
        free(c);
    }
}

/* If a whole request head waits in `c->in` and no read is in flight: consumes it and queues
 * the read that answers it (wrk sends one request at a time; pipelined ones wait their turn). */
static void start_request(struct conn *c) {
    if (c->dead || c->reading) return;
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) {
        if (c->in_len == IN_CAP) drop_conn(c);
        return;
    }
    size_t used = (size_t)(end + 4 - c->in);
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    if (np == MAX_PENDING) {
        fprintf(stderr, "coldfloor: more than %d reads in one turn\n", MAX_PENDING);
        exit(1);
    }
    uint64_t block = next_block();
    memset(&c->cb, 0, sizeof c->cb);
    c->cb.aio_data = (uint64_t)(uintptr_t)c;
    c->cb.aio_lio_opcode = IOCB_CMD_PREAD;
    c->cb.aio_fildes = (uint32_t)file_fd;
    c->cb.aio_buf = (uint64_t)(uintptr_t)c->block;
    c->cb.aio_nbytes = bs;
    c->cb.aio_offset = (int64_t)(block * bs);
    c->cb.aio_flags = IOCB_FLAG_RESFD;
    c->cb.aio_resfd = (uint32_t)efd;
    c->reading = 1;
    pending[np++] = &c->cb;
}

/* A response was written whole: back to reading, and on to a request already waiting. */
static void sent_whole(struct conn *c, int was_waiting) {
    if (was_waiting) watch(c, EPOLLIN, EPOLL_CTL_MOD);
    start_request(c);
}

/* Writes what is left of the response; 1 when all of it is out. */
static int send_rest(struct conn *c) {
    size_t total = head_len + bs;
    while (c->sent < total) {
        struct iovec iov[2];
        int n = 0;
        if (c->sent < head_len) {
            iov[n].iov_base = head + c->sent;
            iov[n++].iov_len = head_len - c->sent;
        }
        size_t off = c->sent > head_len ? c->sent - head_len : 0;
        iov[n].iov_base = c->block + off;
        iov[n++].iov_len = bs - off;
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EAGAIN) {
                write_waits++;
                return 0;
            }
            if (errno == EINTR) continue;
            return -1;
        }
        c->sent += (size_t)w;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: coldfloor PORT FILE BLOCK_SIZE\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    char *unit;
    bs = strtoul(argv[3], &unit, 0);
    if (*unit == 'k' || *unit == 'K') bs <<= 10;  /* fio's spelling: 64k */
    file_fd = open(argv[2], O_RDONLY | O_DIRECT);
    if (file_fd < 0) die("open");
    struct stat st;
    if (fstat(file_fd, &st) < 0) die("fstat");
    blocks = (uint64_t)st.st_size / bs;
    if (blocks == 0 || blocks % 7919 == 0) {
        fprintf(stderr, "coldfloor: %llu blocks (none, or a multiple of 7919)\n",
                (unsigned long long)blocks);
        return 2;
    }
    head_len = (size_t)snprintf(head, sizeof head,
                                "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
                                "Content-Type: application/octet-stream\r\n\r\n", bs);
    /* COLDFLOOR_SNDBUF=BYTES: SO_SNDBUF of each client socket (default: the kernel's). */
    if (getenv("COLDFLOOR_SNDBUF")) sndbuf = atoi(getenv("COLDFLOOR_SNDBUF"));
    const char *order = getenv("COLDFLOOR_ORDER");
    random_order = order && strcmp(order, "random") == 0;
    const char *bufs = getenv("COLDFLOOR_BUFS");
    if (bufs && *bufs) region_init(bufs);
    if (syscall(SYS_io_setup, 4096, &ctx) < 0) die("io_setup");
    efd = eventfd(0, EFD_NONBLOCK);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(lfd, 1024) < 0) die("listen");
    ep = epoll_create1(0);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    struct epoll_event eev = {.events = EPOLLIN, .data.ptr = &efd};
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &eev);

    /* SIGTERM is taken only inside epoll_pwait, so that one sent at any moment ends it. */
    sigset_t term, open_mask;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, &open_mask);
    sigdelset(&open_mask, SIGTERM);
    struct epoll_event evs[MAX_EVENTS];
    struct io_event done[MAX_EVENTS];
    for (;;) {
        np = 0;
        int n = epoll_pwait(ep, evs, MAX_EVENTS, -1, &open_mask);
        if (stopping) finish();
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == NULL) {  /* new clients */
                int fd;
                for (;;) {
                    fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) break;
                        die("accept4");
                    }
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    if (sndbuf) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
                    struct conn *c = calloc(1, sizeof *c);
                    if (!c || !(c->block = block_alloc())) die("alloc");
                    c->fd = fd;
                    watch(c, EPOLLIN, EPOLL_CTL_ADD);
                }
                continue;
            }
            if (p == &efd) {  /* reads completed */
                uint64_t k;
                if (read(efd, &k, sizeof k) < 0 && errno != EAGAIN) die("eventfd");
                long got;
                while ((got = syscall(SYS_io_getevents, ctx, 0, MAX_EVENTS, done, NULL)) > 0) {
                    for (long j = 0; j < got; j++) {
                        struct conn *c = (struct conn *)(uintptr_t)done[j].data;
                        c->reading = 0;
                        in_flight_add(-1);
                        if (c->dead) continue;  /* freed at the end of the turn */
                        if (done[j].res != (long long)bs) {
                            fprintf(stderr, "coldfloor: read returned %lld\n", done[j].res);
                            exit(1);
                        }
                        crc_sink ^= crc3(c->block, bs);
                        responses++;
                        c->sent = 0;
                        int r = send_rest(c);
                        if (r < 0) drop_conn(c);
                        else if (r == 0) watch(c, EPOLLOUT, EPOLL_CTL_MOD);
                        else sent_whole(c, 0);
                    }
                }
                continue;
            }
            struct conn *c = p;
            if (c->dead) continue;
            if (evs[i].events & EPOLLOUT) {
                int r = send_rest(c);
                if (r < 0) drop_conn(c);
                else if (r == 1) sent_whole(c, 1);
                continue;
            }
            ssize_t r = recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                drop_conn(c);
                continue;
            }
            c->in_len += (size_t)r;
            start_request(c);
        }
        /* This turn's reads, in one system call (as Sepia flushes its ring once a turn). */
        for (int off = 0; off < np;) {
            long s = syscall(SYS_io_submit, ctx, np - off, pending + off);
            if (s < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                die("io_submit");
            }
            off += (int)s;
        }
        if (np) in_flight_add(np);
        bury();
    }
}
