package ebb.harness;

import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.harness.Neo4j;
import org.neo4j.harness.Neo4jBuilder;
import org.neo4j.harness.Neo4jBuilders;

/**
 * Throwaway in-process Neo4j (5.26 LTS, community) for Ebb's tests and CI.
 *
 * <p>Binds Bolt to 127.0.0.1 on a free port (or {@code --port N}), with authentication DISABLED
 * (unless {@code --auth}), HTTP/HTTPS off and usage reporting off. Once the database answers,
 * exactly one line is written to stdout:
 *
 * <pre>EBB_NEO4J_BOLT=bolt://127.0.0.1:PORT</pre>
 *
 * Everything else (Neo4j's own logging, diagnostics) goes to stderr. The server runs until stdin
 * reaches EOF (unless {@code --no-stdin}) or the JVM gets SIGTERM/SIGINT; then Neo4j is closed and
 * its working directory (a random sub-directory of {@code --dir}) is deleted.
 *
 * <p>Options: {@code --host H} (default 127.0.0.1), {@code --port N} (default 0 = free port),
 * {@code --dir PATH} (parent of the store directory, default java.io.tmpdir), {@code --plugins PATH}
 * (Neo4j plugin directory scanned for procedures, e.g. the Graph Data Science jars), {@code
 * --no-stdin} (ignore stdin; stop only on a signal), {@code --pagecache BYTES} (default 64 MiB),
 * {@code --data PATH} (keep the databases and transaction logs there instead of in the working
 * directory, so that they outlive the server and a later start with the same path opens them),
 * {@code --auth} (authentication ENABLED: the built-in user {@code neo4j} / {@code neo4j} must
 * change its password first, e.g. {@code ALTER CURRENT USER SET PASSWORD FROM 'neo4j' TO '...'}
 * on the {@code system} database; for tests of credential handling).
 */
public final class Neo4jHarness {

    private static final String READY_PREFIX = "EBB_NEO4J_BOLT=";

    private Neo4jHarness() {}

    public static void main(String[] args) throws Exception {
        // Keep stdout machine-readable: only the ready line goes there.
        PrintStream realOut =
                new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);

        String host = "127.0.0.1";
        int port = 0;
        Path dir = Paths.get(System.getProperty("java.io.tmpdir"));
        Path plugins = null;
        Path pidfile = null;
        Path data = null;
        boolean watchStdin = true;
        boolean auth = false;
        long pagecache = 64L * 1024 * 1024;

        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--host" -> host = need(args, ++i, a);
                case "--port" -> port = Integer.parseInt(need(args, ++i, a));
                case "--dir" -> dir = Paths.get(need(args, ++i, a));
                case "--plugins" -> plugins = Paths.get(need(args, ++i, a));
                case "--pidfile" -> pidfile = Paths.get(need(args, ++i, a));
                case "--data" -> data = Paths.get(need(args, ++i, a));
                case "--pagecache" -> pagecache = Long.parseLong(need(args, ++i, a));
                case "--no-stdin" -> watchStdin = false;
                case "--auth" -> auth = true;
                case "-h", "--help" -> {
                    System.err.println("usage: Neo4jHarness [--host H] [--port N] [--dir PATH]"
                            + " [--plugins PATH] [--pidfile PATH] [--data PATH] [--pagecache BYTES] [--no-stdin]"
                            + " [--auth]");
                    System.exit(0);
                }
                default -> fail("unknown argument: " + a);
            }
        }
        Files.createDirectories(dir);

        Neo4jBuilder builder = Neo4jBuilders.newInProcessBuilder(dir)
                .withDisabledServer() // no HTTP/HTTPS web server at all
                .withConfig(HttpConnector.enabled, false)
                .withConfig(HttpsConnector.enabled, false)
                .withConfig(BoltConnector.enabled, true)
                .withConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                .withConfig(BoltConnector.advertised_address, new SocketAddress(host, port))
                .withConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .withConfig(GraphDatabaseSettings.auth_enabled, auth)
                .withConfig(GraphDatabaseSettings.udc_enabled, false)
                .withConfig(GraphDatabaseSettings.pagecache_memory, pagecache)
                .withConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                // Netty's default 2 s quiet period (paid twice) makes shutdown take ~5 s.
                .withConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0);
        if (data != null) { // the store outside the working directory: it outlives the server
            Files.createDirectories(data);
            builder = builder.withConfig(GraphDatabaseSettings.data_directory, data.toAbsolutePath());
        }
        if (plugins != null) {
            builder = builder
                    .withConfig(GraphDatabaseSettings.plugin_dir, plugins.toAbsolutePath())
                    .withConfig(GraphDatabaseSettings.procedure_unrestricted, List.of("gds.*"))
                    .withConfig(GraphDatabaseSettings.procedure_allowlist, List.of("*"));
        }

        final Neo4j neo4j;
        try {
            neo4j = builder.build();
        } catch (Throwable t) {
            System.err.println("EBB_NEO4J_ERROR: Neo4j failed to start: " + t);
            t.printStackTrace(System.err);
            System.exit(2);
            return;
        }

        AtomicBoolean closed = new AtomicBoolean(false);
        CountDownLatch stop = new CountDownLatch(1);
        Runnable shutdown = () -> {
            if (closed.compareAndSet(false, true)) {
                System.err.println("ebb-neo4j-harness: shutting down");
                try {
                    neo4j.close();
                } catch (Throwable t) {
                    System.err.println("ebb-neo4j-harness: error during shutdown: " + t);
                }
                System.err.println("ebb-neo4j-harness: stopped");
            }
        };
        Runtime.getRuntime().addShutdownHook(new Thread(shutdown, "ebb-neo4j-shutdown"));

        // Readiness: the default database must answer a query before we announce the URI.
        try (var tx = neo4j.defaultDatabaseService().beginTx()) {
            tx.execute("RETURN 1").close();
            tx.commit();
        }
        URI bolt = neo4j.boltURI();
        if (pidfile != null) {
            Files.writeString(pidfile, ProcessHandle.current().pid() + "\n");
        }
        realOut.println(READY_PREFIX + "bolt://" + host + ":" + bolt.getPort());
        realOut.flush();

        if (watchStdin) {
            Thread reader = new Thread(() -> {
                try {
                    InputStream in = System.in;
                    byte[] buf = new byte[256];
                    while (in.read(buf) >= 0) {
                        // discard; we only wait for EOF
                    }
                } catch (IOException ignored) {
                    // treat as EOF
                }
                System.err.println("ebb-neo4j-harness: stdin closed");
                stop.countDown();
            }, "ebb-neo4j-stdin");
            reader.setDaemon(true);
            reader.start();
        }
        stop.await(); // with --no-stdin this only ends through a signal (shutdown hook)
        shutdown.run();
        System.exit(0);
    }

    private static String need(String[] args, int i, String opt) {
        if (i >= args.length) {
            fail("missing value for " + opt);
        }
        return args[i];
    }

    private static void fail(String msg) {
        System.err.println("ebb-neo4j-harness: " + msg);
        System.exit(64);
    }
}
