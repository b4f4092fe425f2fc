// tests/integration/helpers/JvmSockets.java -- the JVM's own socket code under LD_PRELOAD
// (tests/integration/jvm.sh). Java reaches the kernel through libnet/libnio: blocking reads are a
// poll then a read, a selector is epoll, and an asynchronous close is a dup2 of a dead socket
// over the fd number followed by a signal to the blocked thread (NativeThread).
//
//   java JvmSockets server          NIO selector echo server; prints its port, serves until killed
//   java JvmSockets client PORT     the cases below; prints one deterministic line per result
//
// Every connection first makes sixteen round trips with a millisecond between them, so that it lives
// long enough to switch to the rings before the case begins (the shim's stats say it did).
import java.io.*;
import java.net.*;
import java.nio.ByteBuffer;
import java.nio.channels.*;
import java.security.MessageDigest;
import java.util.*;

public class JvmSockets {
    static final InetAddress LO;
    static {
        try { LO = InetAddress.getByName("127.0.0.1"); } catch (UnknownHostException e) { throw new RuntimeException(e); }
    }

    public static void main(String[] a) throws Exception {
        if (a[0].equals("server")) server();
        else client(Integer.parseInt(a[1]));
    }

    // ------------------------------------------------------------------ the selector server
    static void server() throws IOException {
        Selector sel = Selector.open();
        ServerSocketChannel ss = ServerSocketChannel.open();
        ss.bind(new InetSocketAddress(LO, 0));
        ss.configureBlocking(false);
        ss.register(sel, SelectionKey.OP_ACCEPT);
        System.out.println(((InetSocketAddress) ss.getLocalAddress()).getPort());
        System.out.flush();
        Map<SocketChannel, ByteBuffer> pending = new HashMap<>();
        while (true) {
            sel.select();
            for (Iterator<SelectionKey> it = sel.selectedKeys().iterator(); it.hasNext();) {
                SelectionKey k = it.next();
                it.remove();
                if (!k.isValid()) continue;
                if (k.isAcceptable()) {
                    SocketChannel c = ss.accept();
                    if (c == null) continue;
                    c.configureBlocking(false);
                    c.register(sel, SelectionKey.OP_READ);
                    continue;
                }
                SocketChannel c = (SocketChannel) k.channel();
                ByteBuffer out = pending.get(c);
                if (out != null) {  // back-pressure: read nothing more until the echo is out
                    if (k.isWritable()) c.write(out);
                    if (!out.hasRemaining()) {
                        pending.remove(c);
                        k.interestOps(SelectionKey.OP_READ);
                    }
                    continue;
                }
                ByteBuffer b = ByteBuffer.allocate(65536);
                int n = c.read(b);
                if (n < 0) {
                    c.shutdownOutput();
                    c.close();
                    continue;
                }
                b.flip();
                c.write(b);
                if (b.hasRemaining()) {
                    pending.put(c, b);
                    k.interestOps(SelectionKey.OP_WRITE);
                }
            }
        }
    }

    // ------------------------------------------------------------------ helpers
    static void warmUp(InputStream ci, OutputStream co, InputStream si, OutputStream so) throws Exception {
        for (int i = 0; i < 16; i++) {
            so.write(1);
            if (ci.read() != 1) throw new IOException("warm-up: client read");
            co.write(2);
            if (si.read() != 2) throw new IOException("warm-up: server read");
            Thread.sleep(1);
        }
    }

    static String what(Throwable e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    // A thread's result, or "STILL BLOCKED" after a generous bound (a liveness bound, not a timing).
    static String joined(Thread t, String[] res) throws InterruptedException {
        t.join(20000);
        return t.isAlive() ? "STILL BLOCKED" : res[0];
    }

    static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }

    // ------------------------------------------------------------------ the cases
    static void client(int port) throws Exception {
        echoThroughSelector(port);
        ServerSocket ss = new ServerSocket(0, 50, LO);
        asyncCloseChannel(ss);
        asyncCloseSocket(ss);
        interruptChannel(ss);
        readTimeout(ss);
        halfClose(ss);
        closeWithUnread(ss);
        ss.close();
        say("done");
        System.exit(0);
    }

    // A: four threads, blocking java.net.Socket each, against the selector server: 50 round
    // trips, then 4 MB written by a second thread and shutdownOutput while this one reads the echo.
    static void echoThroughSelector(int port) throws Exception {
        final int total = 4 << 20;
        String[] res = new String[4];
        List<Thread> ts = new ArrayList<>();
        for (int ci = 0; ci < 4; ci++) {
            final int id = ci;
            Thread t = new Thread(() -> {
                try (Socket s = new Socket(LO, port)) {
                    s.setSoTimeout(60000);
                    OutputStream o = s.getOutputStream();
                    InputStream in = s.getInputStream();
                    byte[] one = new byte[64];
                    for (int r = 0; r < 50; r++) {
                        byte[] ping = ("ping" + r).getBytes();
                        o.write(ping);
                        int got = 0;
                        while (got < ping.length) {
                            int n = in.read(one, got, one.length - got);
                            if (n <= 0) throw new IOException("echo ended early");
                            got += n;
                        }
                        if (got != ping.length || !Arrays.equals(Arrays.copyOf(one, got), ping)) throw new IOException("bad echo");
                        if (r < 10) Thread.sleep(1);
                    }
                    byte[] buf = new byte[total];
                    new Random(id).nextBytes(buf);
                    MessageDigest want = MessageDigest.getInstance("SHA-256");
                    want.update(buf);
                    String[] wres = {"ok"};
                    Thread w = new Thread(() -> {
                        try {
                            o.write(buf);
                            s.shutdownOutput();
                        } catch (IOException e) {
                            wres[0] = what(e);
                        }
                    });
                    w.start();
                    MessageDigest got = MessageDigest.getInstance("SHA-256");
                    byte[] rb = new byte[100000];
                    long n = 0;
                    int k;
                    while ((k = in.read(rb)) > 0) {
                        got.update(rb, 0, k);
                        n += k;
                    }
                    w.join();
                    res[id] = n + " bytes, " + (Arrays.equals(want.digest(), got.digest()) ? "same sha256" : "DIFFERENT sha256") +
                              ", writer " + wres[0];
                } catch (Exception e) {
                    res[id] = what(e);
                }
            });
            t.start();
            ts.add(t);
        }
        for (int i = 0; i < 4; i++) {
            ts.get(i).join(120000);
            say("A selector echo " + i + ": " + (ts.get(i).isAlive() ? "STILL RUNNING" : res[i]));
        }
    }

    interface Read { String call() throws Exception; }
    interface Act { String call(Thread reader) throws Exception; }

    // A warmed-up connection whose client end `c` has a thread blocked in `read`; `act` then
    // acts on it from this thread. Prints what the reader got, and what the peer reads after.
    static void blockedRead(String label, Socket c, Socket s, Read read, Act act) throws Exception {
        warmUp(c.getInputStream(), c.getOutputStream(), s.getInputStream(), s.getOutputStream());
        String[] res = {"none"};
        Thread r = new Thread(() -> {
            try {
                res[0] = read.call();
            } catch (Exception e) {
                res[0] = what(e);
            }
        });
        r.start();
        Thread.sleep(100);
        String after = act.call(r);
        say(label + ": " + joined(r, res) + after);
        say(label.charAt(0) + " the peer reads: " + s.getInputStream().read());
        s.close();
    }

    // B: a SocketChannel blocked in read is closed by another thread (dup2 + signal in the JVM).
    static void asyncCloseChannel(ServerSocket ss) throws Exception {
        SocketChannel c = SocketChannel.open(new InetSocketAddress(LO, ss.getLocalPort()));
        blockedRead("B channel closed while read blocks", c.socket(), ss.accept(),
                    () -> "read " + c.read(ByteBuffer.allocate(16)), (r) -> { c.close(); return ""; });
    }

    // C: the same with java.net.Socket (NioSocketImpl: poll, then read).
    static void asyncCloseSocket(ServerSocket ss) throws Exception {
        Socket c = new Socket(LO, ss.getLocalPort());
        blockedRead("C socket closed while read blocks", c, ss.accept(),
                    () -> "read " + c.getInputStream().read(), (r) -> { c.close(); return ""; });
    }

    // D: Thread.interrupt() of a thread blocked in an interruptible channel's read closes it.
    static void interruptChannel(ServerSocket ss) throws Exception {
        SocketChannel c = SocketChannel.open(new InetSocketAddress(LO, ss.getLocalPort()));
        blockedRead("D interrupted read", c.socket(), ss.accept(), () -> "read " + c.read(ByteBuffer.allocate(16)), (r) -> {
            r.interrupt();
            r.join(20000);
            return ", channel open: " + c.isOpen();
        });
    }

    // E: a read timeout (SO_TIMEOUT: poll with a timeout), then the connection still works.
    static void readTimeout(ServerSocket ss) throws Exception {
        Socket c = new Socket(LO, ss.getLocalPort());
        Socket s = ss.accept();
        warmUp(c.getInputStream(), c.getOutputStream(), s.getInputStream(), s.getOutputStream());
        c.setSoTimeout(300);
        try {
            say("E read with nothing sent: read " + c.getInputStream().read());
        } catch (Exception e) {
            say("E read with nothing sent: " + what(e));
        }
        c.setSoTimeout(20000);
        s.getOutputStream().write(42);
        say("E then a byte arrives: read " + c.getInputStream().read());
        c.close();
        say("E the peer reads: " + s.getInputStream().read());
        s.close();
    }

    // F: shutdownOutput; the peer reads to the end, answers, closes; we read the answer then -1.
    static void halfClose(ServerSocket ss) throws Exception {
        Socket c = new Socket(LO, ss.getLocalPort());
        Socket s = ss.accept();
        warmUp(c.getInputStream(), c.getOutputStream(), s.getInputStream(), s.getOutputStream());
        c.getOutputStream().write("last words".getBytes());
        c.shutdownOutput();
        ByteArrayOutputStream seen = new ByteArrayOutputStream();
        int b;
        while ((b = s.getInputStream().read()) >= 0) seen.write(b);
        say("F the peer read before the end: " + seen);
        s.getOutputStream().write("bye".getBytes());
        s.close();
        ByteArrayOutputStream back = new ByteArrayOutputStream();
        while ((b = c.getInputStream().read()) >= 0) back.write(b);
        say("F the answer after our shutdownOutput: " + back + ", then the end");
        c.close();
    }

    // G: the peer closes with our bytes unread: TCP resets, and our next read says so.
    static void closeWithUnread(ServerSocket ss) throws Exception {
        Socket c = new Socket(LO, ss.getLocalPort());
        Socket s = ss.accept();
        warmUp(c.getInputStream(), c.getOutputStream(), s.getInputStream(), s.getOutputStream());
        c.getOutputStream().write(new byte[1000]);
        Thread.sleep(100);
        s.close();
        Thread.sleep(100);
        try {
            say("G read after the peer closed with our bytes unread: read " + c.getInputStream().read());
        } catch (Exception e) {
            say("G read after the peer closed with our bytes unread: " + what(e));
        }
        c.close();
    }
}
