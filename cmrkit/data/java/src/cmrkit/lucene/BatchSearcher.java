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
 * An index without term vectors ("doc vectors", half of Lucene's indexing time) still runs RM3 and
 * Rocchio: the rerankers read each feedback document's terms through TermVectors, and on such an
 * index this class hands them a reader whose term vectors are the stored contents analysed again
 * with the index's analyzer (AnalysedVectors): the same terms and frequencies in the same order,
 * so the expansion, the rankings and the scores are those of an index with stored vectors.
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
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.TermToBytesRefAttribute;
import org.apache.lucene.document.Document;
import org.apache.lucene.index.BaseTermsEnum;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.FieldInfo;
import org.apache.lucene.index.FieldInfos;
import org.apache.lucene.index.Fields;
import org.apache.lucene.index.FilterDirectoryReader;
import org.apache.lucene.index.FilterLeafReader;
import org.apache.lucene.index.ImpactsEnum;
import org.apache.lucene.index.IndexReader;
import org.apache.lucene.index.LeafReader;
import org.apache.lucene.index.LeafReaderContext;
import org.apache.lucene.index.PostingsEnum;
import org.apache.lucene.index.SegmentInfos;
import org.apache.lucene.index.SortedDocValues;
import org.apache.lucene.index.StoredFields;
import org.apache.lucene.index.TermVectors;
import org.apache.lucene.index.Terms;
import org.apache.lucene.index.TermsEnum;
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
  // what the feedback rerankers read term vectors from: the reader itself when the index stores
  // them for contents, else the reader with AnalysedVectors
  private final DirectoryReader feedbackReader;
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
    this.feedbackReader = storesVectors(reader, CONTENTS)
        ? reader : new AnalysedVectors(reader, analyzer, CONTENTS);
    this.pool = Executors.newFixedThreadPool(Math.max(1, threads));
    this.anserini = new Anserini();
  }

  /** Whether the index stores term vectors for a field. */
  static boolean storesVectors(IndexReader reader, String field) {
    FieldInfo info = FieldInfos.getMergedFieldInfos(reader).fieldInfo(field);
    return info != null && info.hasVectors();
  }

  /** Whether RM3 and Rocchio read stored term vectors (true) or analyse the stored contents. */
  public boolean storedVectors() {
    return feedbackReader == reader;
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
    if ((useRm3 || useRocchio) && !storedVectors() && !storesContents()) {
      throw new IllegalStateException(
          "the index stores neither term vectors nor the contents that feedback needs");
    }
    this.cascade = (useRm3 || useRocchio) ? cascadeField.get(simpleSearcher) : null;
    this.rm3 = useRm3;
  }

  /** Whether the index stores the contents text (checked on its first document). */
  private boolean storesContents() {
    try {
      return reader.maxDoc() == 0
          || reader.storedFields().document(0, Set.of(CONTENTS)).get(CONTENTS) != null;
    } catch (IOException e) {
      return false;
    }
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
   * Start searching each query of a batch for its top n units (fields null or empty searches
   * contents alone) on the search threads, and return at once: the caller works on the previous
   * batch's results meanwhile, then collects this one.
   */
  public Pending submit(String[] queries, int n, Map<String, Float> fields) {
    List<Future<Hits>> futures = new ArrayList<>(queries.length);
    for (String q : queries) {
      futures.add(pool.submit(() -> searchOne(q, n, fields)));
    }
    return new Pending(queries, futures);
  }

  /**
   * Wait for a submitted batch. Returns, little-endian: the number of queries q, q hit counts,
   * then every hit's doc number (int32), then every hit's score (float32), queries in order.
   */
  public byte[] collect(Pending pending) throws InterruptedException, IOException {
    String[] queries = pending.queries;
    List<Future<Hits>> futures = pending.futures;
    Hits[] all = new Hits[queries.length];
    int total = 0;
    try {
      for (int i = 0; i < queries.length; i++) {
        try {
          all[i] = futures.get(i).get();
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          throw new IOException("query " + i + " (" + queries[i] + "): " + cause, cause);
        }
        total += all[i].docs.length;
      }
    } catch (InterruptedException | IOException | RuntimeException e) {
      cancel(pending);
      throw e;
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

  /** Drop a submitted batch that will not be collected (its queries not yet started). */
  public void cancel(Pending pending) {
    for (Future<Hits> f : pending.futures) {
      f.cancel(true);
    }
  }

  /** A submitted batch of queries. */
  public static final class Pending {
    final String[] queries;
    final List<Future<Hits>> futures;

    Pending(String[] queries, List<Future<Hits>> futures) {
      this.queries = queries;
      this.futures = futures;
    }
  }

  private Hits searchOne(String text, int n, Map<String, Float> fields) throws Exception {
    Query query = (fields == null || fields.isEmpty())
        ? anserini.buildQuery(CONTENTS, analyzer, text)
        : anserini.buildQuery(fields, analyzer, text);
    if (cascade == null) {
      return adjustTies(Hits.of(searcher.search(query, n, SORT, true)));
    }
    Feedback fb = feedback(query, text, n);
    if (fb.capture.query == null) {
      return anserini.hitsOf(fb.out);  // the cascade searched nothing: its own (adjusted) output
    }
    Capture c = fb.capture;
    return adjustTies(Hits.of(searcher.search(c.query, c.n, c.sort, c.doDocScores)));
  }

  /**
   * Run the feedback cascade on a query's first-stage hits (SimpleSearcher._search: RM3 reranks
   * its first rerankcutoff hits, Rocchio its first n), reading term vectors from feedbackReader;
   * the expanded query it searches with is recorded, not searched.
   */
  private Feedback feedback(Query query, String text, int n) throws Exception {
    Object args = anserini.searchArgs(n);
    int first = rm3 ? anserini.rerankCutoff(args) : n;
    Hits initial = Hits.of(searcher.search(query, first, SORT, true));
    Capture capture = new Capture(feedbackReader, similarity);
    Object context = anserini.context(capture, query, text, anserini.analyze(analyzer, text), args);
    return new Feedback(capture, context, anserini.run(cascade, initial, context));
  }

  /** What {@link #feedback} leaves: the capture, the reranker context and the cascade's output. */
  static final class Feedback {
    final Capture capture;
    final Object context;
    final Object out;

    Feedback(Capture capture, Object context, Object out) {
      this.capture = capture;
      this.context = context;
      this.out = out;
    }
  }

  /**
   * RM3's expansion terms and weights for a query, as SimpleSearcher.get_feedback_terms gives
   * them; none without RM3.
   */
  public Map<String, Float> feedbackTerms(String text) throws Exception {
    if (cascade == null || !rm3) {
      return Collections.emptyMap();
    }
    // SimpleSearcher.get_feedback_terms: the contents query, 10 hits asked for
    Query query = anserini.buildQuery(CONTENTS, analyzer, text);
    return anserini.feedbackTerms(feedback(query, text, 10).context);
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

  /**
   * A view of an index whose term vectors for one field are computed from the field's stored
   * text with the index's analyzer: the terms Lucene indexed for the document, in term (byte)
   * order, each with its frequency in the document, which is what the field's stored term
   * vector holds. Everything else (postings, statistics, stored fields) is the index's own.
   */
  static final class AnalysedVectors extends FilterDirectoryReader {
    private final Analyzer analyzer;
    private final String field;

    AnalysedVectors(DirectoryReader in, Analyzer analyzer, String field) throws IOException {
      super(in, new SubReaderWrapper() {
        @Override
        public LeafReader wrap(LeafReader leaf) {
          return new AnalysedLeaf(leaf, analyzer, field);
        }
      });
      this.analyzer = analyzer;
      this.field = field;
    }

    @Override
    protected DirectoryReader doWrapDirectoryReader(DirectoryReader in) throws IOException {
      return new AnalysedVectors(in, analyzer, field);
    }

    @Override
    public CacheHelper getReaderCacheHelper() {
      return null;
    }
  }

  /** One segment of AnalysedVectors. */
  static final class AnalysedLeaf extends FilterLeafReader {
    private final Analyzer analyzer;
    private final String field;

    AnalysedLeaf(LeafReader in, Analyzer analyzer, String field) {
      super(in);
      this.analyzer = analyzer;
      this.field = field;
    }

    @Override
    public CacheHelper getCoreCacheHelper() {
      return null;
    }

    @Override
    public CacheHelper getReaderCacheHelper() {
      return null;
    }

    @Override
    public TermVectors termVectors() throws IOException {
      StoredFields stored = in.storedFields();
      Set<String> wanted = Set.of(field);
      return new TermVectors() {
        @Override
        public Fields get(int doc) throws IOException {
          String text = stored.document(doc, wanted).get(field);
          Terms terms = text == null ? null : analyse(text);
          return terms == null ? null : new OneField(field, terms);
        }
      };
    }

    @Override
    @Deprecated
    public Fields getTermVectors(int doc) throws IOException {
      return termVectors().get(doc);
    }

    /** The document's terms and their frequencies; null when the text has no terms. */
    private Terms analyse(String text) throws IOException {
      TreeMap<BytesRef, long[]> counts = new TreeMap<>();
      try (TokenStream ts = analyzer.tokenStream(field, text)) {
        TermToBytesRefAttribute term = ts.addAttribute(TermToBytesRefAttribute.class);
        ts.reset();
        while (ts.incrementToken()) {
          BytesRef bytes = term.getBytesRef();
          long[] count = counts.get(bytes);
          if (count == null) {
            counts.put(BytesRef.deepCopyOf(bytes), new long[] {1});
          } else {
            count[0]++;
          }
        }
        ts.end();
      }
      if (counts.isEmpty()) {
        return null;
      }
      BytesRef[] keys = counts.keySet().toArray(new BytesRef[0]);
      long[] freqs = new long[keys.length];
      int i = 0;
      for (long[] count : counts.values()) {
        freqs[i++] = count[0];
      }
      return new DocTerms(keys, freqs);
    }
  }

  /** Fields holding one field's terms. */
  static final class OneField extends Fields {
    private final String name;
    private final Terms terms;

    OneField(String name, Terms terms) {
      this.name = name;
      this.terms = terms;
    }

    @Override
    public Iterator<String> iterator() {
      return Collections.singletonList(name).iterator();
    }

    @Override
    public Terms terms(String field) {
      return name.equals(field) ? terms : null;
    }

    @Override
    public int size() {
      return 1;
    }
  }

  /** One document's terms (sorted) and frequencies, as a term vector without positions. */
  static final class DocTerms extends Terms {
    private final BytesRef[] terms;
    private final long[] freqs;

    DocTerms(BytesRef[] terms, long[] freqs) {
      this.terms = terms;
      this.freqs = freqs;
    }

    @Override
    public TermsEnum iterator() {
      return new DocTermsEnum(terms, freqs);
    }

    @Override
    public long size() {
      return terms.length;
    }

    @Override
    public long getSumTotalTermFreq() {
      long sum = 0;
      for (long f : freqs) {
        sum += f;
      }
      return sum;
    }

    @Override
    public long getSumDocFreq() {
      return terms.length;
    }

    @Override
    public int getDocCount() {
      return 1;
    }

    @Override
    public boolean hasFreqs() {
      return true;
    }

    @Override
    public boolean hasOffsets() {
      return false;
    }

    @Override
    public boolean hasPositions() {
      return false;
    }

    @Override
    public boolean hasPayloads() {
      return false;
    }
  }

  static final class DocTermsEnum extends BaseTermsEnum {
    private final BytesRef[] terms;
    private final long[] freqs;
    private int at = -1;

    DocTermsEnum(BytesRef[] terms, long[] freqs) {
      this.terms = terms;
      this.freqs = freqs;
    }

    @Override
    public BytesRef next() {
      if (at < terms.length) {
        at++;
      }
      return at < terms.length ? terms[at] : null;
    }

    @Override
    public SeekStatus seekCeil(BytesRef text) {
      int i = Arrays.binarySearch(terms, text);
      if (i >= 0) {
        at = i;
        return SeekStatus.FOUND;
      }
      at = -i - 1;
      return at < terms.length ? SeekStatus.NOT_FOUND : SeekStatus.END;
    }

    @Override
    public void seekExact(long ord) {
      at = (int) ord;
    }

    @Override
    public BytesRef term() {
      return terms[at];
    }

    @Override
    public long ord() {
      return at;
    }

    @Override
    public int docFreq() {
      return 1;
    }

    @Override
    public long totalTermFreq() {
      return freqs[at];
    }

    @Override
    public PostingsEnum postings(PostingsEnum reuse, int flags) {
      throw new UnsupportedOperationException("analysed term vectors have no postings");
    }

    @Override
    public ImpactsEnum impacts(int flags) {
      throw new UnsupportedOperationException("analysed term vectors have no impacts");
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
    final Field contextFeedback;
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
      contextFeedback = context.getField("feedbackTerms");
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

    @SuppressWarnings("unchecked")
    Map<String, Float> feedbackTerms(Object context) throws IllegalAccessException {
      Object terms = contextFeedback.get(context);
      return terms == null ? Collections.emptyMap() : (Map<String, Float>) terms;
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
