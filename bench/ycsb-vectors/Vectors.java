import site.ycsb.Utils;
import site.ycsb.generator.*;
import java.lang.reflect.Field;
public class Vectors {
  static double f(Object o, String name) throws Exception { Field fl = ZipfianGenerator.class.getDeclaredField(name); fl.setAccessible(true); return fl.getDouble(o); }
  public static void main(String[] a) throws Exception {
    long[] xs = {0,1,2,3,42,1000,999999,123456789L,10000000000L};
    for (long x : xs) System.out.println("fnv " + x + " " + Utils.fnvhash64(x));
    for (long n : new long[]{2,10,1000,1000000}) { java.lang.reflect.Method m = ZipfianGenerator.class.getDeclaredMethod("zetastatic", long.class, double.class); m.setAccessible(true); System.out.println("zeta " + n + " " + m.invoke(null, n, 0.99)); }
    ZipfianGenerator z = new ZipfianGenerator(0, 999);
    System.out.println("zipf1000 zetan " + f(z,"zetan") + " eta " + f(z,"eta") + " zeta2 " + f(z,"zeta2theta"));
    ZipfianGenerator zs = new ZipfianGenerator(0, 10000000000L, 0.99, 26.46902820178302);
    System.out.println("zipfbig eta " + f(zs,"eta"));
    int N = 4000000;
    long[] h = new long[1000];
    for (int i = 0; i < N; i++) h[(int) z.nextValue().longValue()]++;
    System.out.print("zipfhist"); for (int i = 0; i < 10; i++) System.out.print(" " + h[i]); System.out.println();
    ScrambledZipfianGenerator s = new ScrambledZipfianGenerator(0, 999);
    long[] hs = new long[1000];
    for (int i = 0; i < N; i++) hs[(int) s.nextValue().longValue()]++;
    Integer[] idx = new Integer[1000]; for (int i = 0; i < 1000; i++) idx[i] = i;
    java.util.Arrays.sort(idx, (p, q) -> Long.compare(hs[q], hs[p]));
    System.out.print("scrambledtop"); for (int i = 0; i < 8; i++) System.out.print(" " + idx[i] + ":" + hs[idx[i]]); System.out.println();
  }
}
