// benchmarks/jdk_http.java -- the JDK's HTTP/1.1 client against its HttpServer in one process:
// 8 threads x 300 POSTs of 0-200 KB, every response checked (docs/results.md).
//   time java benchmarks/jdk_http.java                                   (plain TCP)
//   time env LD_PRELOAD=$PWD/build/librdmasock.so java benchmarks/jdk_http.java
// Prints 'thread N ok 300' per thread.
import com.sun.net.httpserver.*;
import java.net.*;
import java.net.http.*;
import java.util.concurrent.*;
import java.io.*;
public class jdk_http {
  public static void main(String[] a) throws Exception {
    HttpServer srv = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 100);
    srv.setExecutor(Executors.newFixedThreadPool(4));
    srv.createContext("/", ex -> { byte[] in = ex.getRequestBody().readAllBytes(); byte[] out = ("got " + in.length + "\n").getBytes(); ex.sendResponseHeaders(200, out.length); ex.getResponseBody().write(out); ex.close(); });
    srv.start();
    int port = srv.getAddress().getPort();
    HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    ExecutorService pool = Executors.newFixedThreadPool(8);
    java.util.List<Future<String>> fs = new java.util.ArrayList<>();
    for (int t = 0; t < 8; t++) { final int id = t; fs.add(pool.submit(() -> { StringBuilder sb = new StringBuilder(); int ok = 0;
      for (int i = 0; i < 300; i++) { int n = (i * 7919 + id) % 200000;
        HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/x")).POST(HttpRequest.BodyPublishers.ofByteArray(new byte[n])).build(), HttpResponse.BodyHandlers.ofString());
        if (r.body().equals("got " + n + "\n")) ok++; }
      return "thread " + id + " ok " + ok; })); }
    for (Future<String> f : fs) System.out.println(f.get(120, TimeUnit.SECONDS));
    System.exit(0);
  }
}
