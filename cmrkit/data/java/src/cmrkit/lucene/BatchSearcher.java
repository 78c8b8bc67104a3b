/*
 * cmrkit's Lucene helper: Anserini's searches, with whole result arrays for Python.
 *
 * Anserini's SimpleSearcher loads each hit's stored record (ScoredDocs.fromTopDocs) and Pyserini
 * then reads every hit through the Python-Java bridge one field at a time. This class runs the
 * same searches (the query Anserini's BagOfWordsQueryGenerator builds, BM25 with the same k1 and
 * b, the same sort: score, then the id field ascending; the same rounding and tie separation as
 * Anserini's ScoreTiesAdjusterReranker; RM3 and Rocchio through Anserini's own rerankers) and
 * returns Lucene doc numbers and scores of a whole batch of queries as one little-endian byte
 * array, without loading stored records.
 *
 * It is compiled against Lucene alone (--release 17; Anserini's classes need Java 21 to compile
 * against, so they are reached through reflection, once per query, never per hit). Built by
 * `python -m cmrkit.retrieval.helper --build`; see docs/retrieval.md.
 */
package cmrkit.lucene;

import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.document.Document;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.SegmentInfos;
import org.apache.lucene.index.SortedDocValues;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.Sort;
import org.apache.lucene.search.SortField;
import org.apache.lucene.search.TopFieldDocs;
import org.apache.lucene.search.TotalHits;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.Directory;
import org.apache.lucene.store.FSDirectory;
import org.apache.lucene.util.BytesRef;

public final class BatchSearcher implements Closeable {
  private static final String ID = "id";
  private static final String CONTENTS = "contents";
  // SimpleSearcher.BREAK_SCORE_TIES_BY_DOCID
  private static final Sort SORT =
      new Sort(SortField.FIELD_SCORE, new SortField(ID, SortField.Type.STRING_VAL));

  private final Directory directory;
  private final DirectoryReader reader;
  private final IndexSearcher searcher;
  private final BM25Similarity similarity;
  private final Analyzer analyzer;
  private final ExecutorService pool;
  private final Anserini anserini;

  private Object cascade;  // Anserini's RerankerCascade of RM3 or Rocchio; null without feedback
  private boolean rm3;

  public BatchSearcher(String indexDir, Analyzer analyzer, float k1, float b, int threads)
      throws IOException, ReflectiveOperationException {
    this.directory = FSDirectory.open(Paths.get(indexDir));
    this.reader = DirectoryReader.open(directory);
    this.similarity = new BM25Similarity(k1, b);
    this.searcher = new IndexSearcher(reader);
    this.searcher.setSimilarity(similarity);
    this.analyzer = analyzer;
    this.pool = Executors.newFixedThreadPool(Math.max(1, threads));
    this.anserini = new Anserini();
  }

  /** Use the feedback (RM3 or Rocchio) that an Anserini SimpleSearcher is set up with. */
  public void setFeedback(Object simpleSearcher) throws ReflectiveOperationException {
    Class<?> cls = Class.forName("io.anserini.search.SimpleSearcher");
    Field cascadeField = cls.getDeclaredField("cascade");
    Field rm3Field = cls.getDeclaredField("useRM3");
    Field rocchioField = cls.getDeclaredField("useRocchio");
    cascadeField.setAccessible(true);
    rm3Field.setAccessible(true);
    rocchioField.setAccessible(true);
    boolean useRm3 = rm3Field.getBoolean(simpleSearcher);
    boolean useRocchio = rocchioField.getBoolean(simpleSearcher);
    this.cascade = (useRm3 || useRocchio) ? cascadeField.get(simpleSearcher) : null;
    this.rm3 = useRm3;
  }

  public int maxDoc() {
    return reader.maxDoc();
  }

  /** The id of the index commit this reader sees (random per commit, in hexadecimal). */
  public String commitId() throws IOException {
    byte[] id = SegmentInfos.readLatestCommit(directory).getId();
    StringBuilder sb = new StringBuilder();
    for (byte x : id) {
      sb.append(String.format("%02x", x & 0xff));
    }
    return sb.toString();
  }

  /** Write every document's id, one a line, in doc-number order (UTF-8). */
  public void writeDocnos(String path) throws IOException {
    try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(Paths.get(path)), 1 << 16)) {
      for (LeafReaderContext leaf : reader.leaves()) {
        LeafReader lr = leaf.reader();
        SortedDocValues values = lr.getSortedDocValues(ID);
        StoredFields stored = values == null ? lr.storedFields() : null;
        for (int doc = 0; doc < lr.maxDoc(); doc++) {
          if (values != null && values.advanceExact(doc)) {
            BytesRef ref = values.lookupOrd(values.ordValue());
            out.write(ref.bytes, ref.offset, ref.length);
          } else {
            String id = (stored != null ? stored : lr.storedFields()).document(doc).get(ID);
            if (id == null) {
              throw new IOException("document " + (leaf.docBase + doc) + " has no id");
            }
            out.write(id.getBytes(StandardCharsets.UTF_8));
          }
          out.write('\n');
        }
      }
    }
  }

  /**
   * Search each query for its top n units; fields null or empty searches contents alone.
   *
   * Returns, little-endian: the number of queries q, q hit counts, then every hit's doc number
   * (int32), then every hit's score (float32), queries in order.
   */
  public byte[] search(String[] queries, int n, Map<String, Float> fields)
      throws InterruptedException, IOException {
    List<Future<Hits>> futures = new ArrayList<>(queries.length);
    for (String q : queries) {
      futures.add(pool.submit(() -> searchOne(q, n, fields)));
    }
    Hits[] all = new Hits[queries.length];
    int total = 0;
    for (int i = 0; i < queries.length; i++) {
      try {
        all[i] = futures.get(i).get();
      } catch (ExecutionException e) {
        for (Future<Hits> f : futures) {
          f.cancel(true);
        }
        Throwable cause = e.getCause();
        throw new IOException("query " + i + " (" + queries[i] + "): " + cause, cause);
      }
      total += all[i].docs.length;
    }
    ByteBuffer buf = ByteBuffer.allocate(4 * (1 + queries.length + 2 * total));
    buf.order(ByteOrder.LITTLE_ENDIAN);
    buf.putInt(queries.length);
    for (Hits h : all) {
      buf.putInt(h.docs.length);
    }
    for (Hits h : all) {
      for (int d : h.docs) {
        buf.putInt(d);
      }
    }
    for (Hits h : all) {
      for (float s : h.scores) {
        buf.putFloat(s);
      }
    }
    return buf.array();
  }

  private Hits searchOne(String text, int n, Map<String, Float> fields) throws Exception {
    Query query = (fields == null || fields.isEmpty())
        ? anserini.buildQuery(CONTENTS, analyzer, text)
        : anserini.buildQuery(fields, analyzer, text);
    if (cascade == null) {
      return adjustTies(Hits.of(searcher.search(query, n, SORT, true)));
    }
    // SimpleSearcher._search: RM3 reranks its first rerankcutoff hits, Rocchio its first n
    Object args = anserini.searchArgs(n);
    int first = rm3 ? anserini.rerankCutoff(args) : n;
    Hits initial = Hits.of(searcher.search(query, first, SORT, true));
    Capture capture = new Capture(reader, similarity);
    Object context = anserini.context(capture, query, text, anserini.analyze(analyzer, text), args);
    Object out = anserini.run(cascade, initial, context);
    if (capture.query == null) {
      return anserini.hitsOf(out);  // the cascade searched nothing: its own (adjusted) output
    }
    TopFieldDocs rs = searcher.search(capture.query, capture.n, capture.sort, capture.doDocScores);
    return adjustTies(Hits.of(rs));
  }

  /** Anserini's ScoreTiesAdjusterReranker: scores rounded to 4 decimals, ties lowered by 1e-6. */
  static Hits adjustTies(Hits hits) {
    float[] scores = hits.scores;
    int dup = 0;
    for (int i = 0; i < scores.length; i++) {
      scores[i] = (float) (Math.round(scores[i] * 10000.0) / 10000.0);
      if (i == 0 || scores[i - 1] - scores[i] > 1e-4f) {
        dup = 0;
      } else {
        dup++;
        scores[i] -= 1e-6f * dup;
      }
    }
    return hits;
  }

  @Override
  public void close() throws IOException {
    pool.shutdownNow();
    reader.close();
    directory.close();
  }

  /** Doc numbers and scores of one query's hits. */
  static final class Hits {
    final int[] docs;
    final float[] scores;

    Hits(int[] docs, float[] scores) {
      this.docs = docs;
      this.scores = scores;
    }

    static Hits of(TopFieldDocs rs) {
      int[] docs = new int[rs.scoreDocs.length];
      float[] scores = new float[rs.scoreDocs.length];
      for (int i = 0; i < docs.length; i++) {
        ScoreDoc sd = rs.scoreDocs[i];
        docs[i] = sd.doc;
        scores[i] = sd.score;
      }
      return new Hits(docs, scores);
    }
  }

  /**
   * An IndexSearcher handed to Anserini's feedback rerankers: it records the expanded query the
   * reranker searches with and answers with no hits, so that no stored record is loaded; the
   * recorded query is then searched for real.
   */
  static final class Capture extends IndexSearcher {
    Query query;
    int n;
    Sort sort;
    boolean doDocScores;

    Capture(IndexReader reader, BM25Similarity similarity) {
      super(reader);
      setSimilarity(similarity);
    }

    @Override
    public TopFieldDocs search(Query q, int n, Sort sort, boolean doDocScores) {
      if (this.query != null) {
        throw new IllegalStateException("a feedback reranker searched twice");
      }
      this.query = q;
      this.n = n;
      this.sort = sort;
      this.doDocScores = doDocScores;
      return new TopFieldDocs(
          new TotalHits(0, TotalHits.Relation.EQUAL_TO), new ScoreDoc[0], sort.getSort());
    }
  }

  /** The Anserini calls, through reflection (Anserini's classes need Java 21 to compile). */
  static final class Anserini {
    final Object generator;
    final Method buildField;
    final Method buildFields;
    final Method analyze;
    final Class<?> argsClass;
    final Constructor<?> argsNew;
    final Field argsHits;
    final Field argsCutoff;
    final Constructor<?> contextNew;
    final Constructor<?> scoredNew;
    final Field scoredDocids;
    final Field scoredLuceneDocids;
    final Field scoredDocuments;
    final Field scoredScores;
    final Method cascadeRun;

    Anserini() throws ReflectiveOperationException {
      Class<?> gen = Class.forName("io.anserini.search.query.BagOfWordsQueryGenerator");
      generator = gen.getConstructor().newInstance();
      buildField = gen.getMethod("buildQuery", String.class, Analyzer.class, String.class);
      buildFields = gen.getMethod("buildQuery", Map.class, Analyzer.class, String.class);
      analyze = Class.forName("io.anserini.analysis.AnalyzerUtils")
          .getMethod("analyze", Analyzer.class, String.class);
      argsClass = Class.forName("io.anserini.search.SearchCollection$Args");
      argsNew = argsClass.getConstructor();
      argsHits = argsClass.getField("hits");
      argsCutoff = argsClass.getField("rerankcutoff");
      Class<?> scored = Class.forName("io.anserini.search.ScoredDocs");
      scoredNew = scored.getConstructor();
      scoredDocids = scored.getField("docids");
      scoredLuceneDocids = scored.getField("lucene_docids");
      scoredDocuments = scored.getField("lucene_documents");
      scoredScores = scored.getField("scores");
      Class<?> context = Class.forName("io.anserini.rerank.RerankerContext");
      contextNew = context.getConstructor(IndexSearcher.class, Object.class, Query.class,
          String.class, String.class, List.class, Query.class, argsClass);
      cascadeRun = Class.forName("io.anserini.rerank.RerankerCascade")
          .getMethod("run", scored, context);
    }

    Query buildQuery(String field, Analyzer a, String text) throws ReflectiveOperationException {
      return (Query) unwrap(() -> buildField.invoke(generator, field, a, text));
    }

    Query buildQuery(Map<String, Float> fields, Analyzer a, String text)
        throws ReflectiveOperationException {
      return (Query) unwrap(() -> buildFields.invoke(generator, fields, a, text));
    }

    List<?> analyze(Analyzer a, String text) throws ReflectiveOperationException {
      return (List<?>) unwrap(() -> analyze.invoke(null, a, text));
    }

    Object searchArgs(int hits) throws ReflectiveOperationException {
      Object args = argsNew.newInstance();
      argsHits.setInt(args, hits);
      return args;
    }

    int rerankCutoff(Object args) throws IllegalAccessException {
      return argsCutoff.getInt(args);
    }

    Object context(IndexSearcher s, Query q, String text, List<?> tokens, Object args)
        throws ReflectiveOperationException {
      return contextNew.newInstance(s, null, q, null, text, tokens, null, args);
    }

    /** Run a reranker cascade on first-stage hits (ScoredDocs without stored records). */
    Object run(Object cascade, Hits hits, Object context) throws ReflectiveOperationException {
      Object docs = scoredNew.newInstance();
      scoredDocids.set(docs, new String[hits.docs.length]);
      scoredLuceneDocids.set(docs, hits.docs);
      scoredDocuments.set(docs, new Document[hits.docs.length]);
      scoredScores.set(docs, hits.scores);
      return unwrap(() -> cascadeRun.invoke(cascade, docs, context));
    }

    Hits hitsOf(Object scoredDocs) throws IllegalAccessException {
      return new Hits(
          (int[]) scoredLuceneDocids.get(scoredDocs), (float[]) scoredScores.get(scoredDocs));
    }

    interface Call {
      Object call() throws ReflectiveOperationException;
    }

    /** The exception a reflective call threw, rather than its wrapper. */
    static Object unwrap(Call c) throws ReflectiveOperationException {
      try {
        return c.call();
      } catch (InvocationTargetException e) {
        Throwable cause = e.getCause();
        if (cause instanceof RuntimeException) {
          throw (RuntimeException) cause;
        }
        if (cause instanceof Error) {
          throw (Error) cause;
        }
        throw e;
      }
    }
  }
}
