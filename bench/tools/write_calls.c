/* What one socket write costs the kernel, by system call: writev with one slice, send,
 * writev with two slices, sendmsg with two slices. One loopback TCP connection (Nagle off,
 * as Sepia's); each call's wall time is taken around it (the kernel's send path, loopback
 * delivery included), then the bytes are read back on the other end outside the timing.
 *
 *   cc -O2 -o /tmp/write_calls bench/tools/write_calls.c
 *   taskset -c 1 /tmp/write_calls [BYTES] [CALLS]     (default 1200 bytes, 200000 calls)
 *
 * Prints the mean µs per call of each kind, three rounds interleaved. Results in
 * bench/RESULTS.md (2026-11-25, "header fields as positions").
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void must(int ok, const char *what) {
    if (!ok) {
        perror(what);
        exit(1);
    }
}

int main(int argc, char **argv) {
    int size = argc > 1 ? atoi(argv[1]) : 1200;
    int calls = argc > 2 ? atoi(argv[2]) : 200000;
    must(size > 1 && size <= 4096, "BYTES must be 2..4096");
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    must(bind(listener, (void *)&addr, sizeof addr) == 0, "bind");
    must(listen(listener, 1) == 0, "listen");
    must(getsockname(listener, (void *)&addr, &len) == 0, "getsockname");
    int client = socket(AF_INET, SOCK_STREAM, 0);
    must(connect(client, (void *)&addr, sizeof addr) == 0, "connect");
    int server = accept(listener, NULL, NULL);
    must(server >= 0, "accept");
    int one = 1;
    must(setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");

    static char out[4096], in[65536];
    memset(out, 'x', sizeof out);
    const char *names[] = {"writev, 1 slice", "send", "writev, 2 slices", "sendmsg, 2 slices"};
    int half = size / 2;
    for (int round = 1; round <= 3; round++) {
        for (int kind = 0; kind < 4; kind++) {
            double spent = 0;
            for (int i = 0; i < calls; i++) {
                struct iovec one_slice[1] = {{out, size}};
                struct iovec two_slices[2] = {{out, half}, {out + half, size - half}};
                struct msghdr msg = {.msg_iov = two_slices, .msg_iovlen = 2};
                ssize_t sent = 0;
                double t0 = now();
                switch (kind) {
                case 0: sent = writev(client, one_slice, 1); break;
                case 1: sent = send(client, out, size, MSG_NOSIGNAL); break;
                case 2: sent = writev(client, two_slices, 2); break;
                case 3: sent = sendmsg(client, &msg, MSG_NOSIGNAL); break;
                }
                spent += now() - t0;
                must(sent == size, "short write");
                for (ssize_t got = 0; got < sent;) {
                    ssize_t n = recv(server, in, sizeof in, 0);
                    must(n > 0, "recv");
                    got += n;
                }
            }
            printf("round %d  %-18s %.3f us per call\n", round, names[kind], spent / calls * 1e6);
        }
    }
    return 0;
}
