/* The ceiling server (issue 23): what one core can do answering keep-alive requests over this
 * kernel's sockets with nothing else to do. One thread, level-triggered epoll, non-blocking
 * sockets; every request head read ("\r\n\r\n") is answered with the same pre-built 1 KiB
 * response, written with one write(2) per batch of heads read together (pipelining works).
 * No parsing, no cache, no log, no allocation after start: the floor under any HTTP server's
 * cost per keep-alive hit. bench/run.sh builds it with cc and runs it as the target `ceiling`
 * on the hit-1k cases.
 *
 *     cc -O2 -o ceiling ceiling.c && ./ceiling PORT
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BODY 1024
#define MAX_EVENTS 256
#define MAX_FD 65536
#define BATCH 16 /* responses one write may carry (pipelined heads) */

static char response[BATCH * (BODY + 128)];
static size_t response_len;
/* How far into "\r\n\r\n" each connection's last read ended: a head split across reads. */
static unsigned char matched[MAX_FD];

static void build_response(void) {
    char head[128];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nCache-Control: max-age=3600\r\n\r\n",
                     BODY);
    response_len = (size_t)n + BODY;
    for (int i = 0; i < BATCH; i++) {
        memcpy(response + i * response_len, head, (size_t)n);
        memset(response + i * response_len + n, 'x', BODY);
    }
}

/* Counts complete heads in buf, carrying a partial "\r\n\r\n" across reads. */
static int count_heads(int fd, const char *buf, ssize_t len) {
    static const char end[] = "\r\n\r\n";
    int heads = 0;
    unsigned m = matched[fd];
    for (ssize_t i = 0; i < len; i++) {
        if (buf[i] == end[m]) {
            if (++m == 4) {
                heads++;
                m = 0;
            }
        } else {
            m = buf[i] == '\r' ? 1 : 0;
        }
    }
    matched[fd] = (unsigned char)m;
    return heads;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    build_response();
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* inherited by accepted */
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) || listen(lfd, 4096)) {
        perror("listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[MAX_EVENTS];
    char buf[16384];
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
                    if (c >= MAX_FD) {
                        close(c);
                        continue;
                    }
                    matched[c] = 0;
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                close(fd); /* closing removes it from the epoll set */
                continue;
            }
            int heads = count_heads(fd, buf, r);
            while (heads > 0) {
                int k = heads < BATCH ? heads : BATCH;
                /* Loopback with ~1 KiB per response: a short write would mean a client that
                 * stopped reading, which wrk never does; such a connection is dropped. */
                if (write(fd, response, (size_t)k * response_len) != (ssize_t)(k * response_len)) {
                    close(fd);
                    break;
                }
                heads -= k;
            }
        }
    }
}
