/* The relay floor (issue 23): what one core pays to pass keep-alive requests to an origin and
 * the responses back over this kernel's sockets, with nothing else to do. One thread,
 * level-triggered epoll, non-blocking sockets. Each accepted client gets its own keep-alive
 * connection to the origin, opened at accept; bytes read from one side are written to the other
 * as they come (one read and one write per message each way when they fit, as for 1 KiB
 * objects). No parsing, no cache, no log, no routing, no allocation after start: the floor
 * under the cost per miss or pass-through request of a proxy built on epoll and read/write on
 * this kernel (measured while the relay idles part of its core, an upper bound of it).
 * bench/run.sh builds it with cc and runs it as the target `relay` on the miss and no-store
 * cases.
 *
 * With --batch it reads every connection the epoll batch reported before it writes any (the
 * order haproxy runs its receives and sends in), so the responses of a batch leave back to
 * back; bench/tools/ab_cpu.sh runs it as `relay-batch`.
 *
 *     cc -O2 -o relay relay.c && ./relay PORT ORIGIN_PORT [--batch]
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_EVENTS 256
#define MAX_FD 65536

/* The other end of each relayed connection (client <-> origin), -1 when none. */
static int peer[MAX_FD];

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return a;
}

/* A blocking connect to the origin on loopback (once per client connection, which then
 * carries all its requests), then non-blocking for the relay. */
static int connect_origin(int origin_port) {
    struct sockaddr_in a = loopback(origin_port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd >= MAX_FD || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    if (fcntl(fd, F_SETFL, O_NONBLOCK)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void drop(int fd) {
    int p = peer[fd];
    close(fd); /* closing removes it from the epoll set */
    peer[fd] = -1;
    if (p >= 0) {
        close(p);
        peer[p] = -1;
    }
}

/* Writes all of buf to fd. With 1 KiB messages a write always fits the socket buffer; a
 * larger response that does not waits here for room (the relay is a yardstick for small
 * messages, not a proxy: it holds no per-connection output buffer). A peer that has not
 * read for 10 s, or a write error, drops the pair. */
static int write_all(int fd, const char *buf, ssize_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, (size_t)len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, 10000) <= 0)
                return -1;
            continue;
        }
        if (w <= 0)
            return -1;
        buf += w;
        len -= w;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4 || (argc == 4 && strcmp(argv[3], "--batch"))) {
        fprintf(stderr, "usage: %s PORT ORIGIN_PORT [--batch]\n", argv[0]);
        return 2;
    }
    int batch = argc == 4;
    int origin_port = atoi(argv[2]);
    memset(peer, 0xff, sizeof peer);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* inherited by accepted */
    struct sockaddr_in addr = loopback(atoi(argv[1]));
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, 4096)) {
        perror("listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[MAX_EVENTS];
    /* One buffer per event of a batch (--batch keeps them all until the batch's writes). */
    static char bufs[MAX_EVENTS][65536];
    static int from[MAX_EVENTS];
    static ssize_t len[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, events, MAX_EVENTS, -1);
        if (n < 0 && errno != EINTR) {
            perror("epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    int o = c < MAX_FD ? connect_origin(origin_port) : -1;
                    if (o < 0) {
                        close(c);
                        continue;
                    }
                    peer[c] = o;
                    peer[o] = c;
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                    struct epoll_event oev = {.events = EPOLLIN, .data.fd = o};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) || epoll_ctl(ep, EPOLL_CTL_ADD, o, &oev)) {
                        perror("epoll_ctl");
                        drop(c);
                    }
                }
                continue;
            }
            if (peer[fd] < 0)
                continue; /* dropped earlier in this batch */
            int slot = batch ? i : 0;
            ssize_t r = read(fd, bufs[slot], sizeof bufs[slot]);
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r <= 0)
                drop(fd);
            else if (batch) {
                from[i] = fd;
                len[i] = r;
            } else if (write_all(peer[fd], bufs[0], r))
                drop(fd);
        }
        /* A slot with nothing read keeps len 0: every slot is reset after its batch. */
        for (int i = 0; batch && i < n; i++) {
            if (len[i] > 0 && peer[from[i]] >= 0 && write_all(peer[from[i]], bufs[i], len[i]))
                drop(from[i]);
            len[i] = 0;
        }
    }
}
