# fsync.gp -- fsync time vs dirty pages, tracked and hammer per volume size, log-log
# Variables (gnuplot -e): files  data files, one per volume size (pages tracked hammer raw, us)
#                         titles one word per file ("1_GiB"; "_" shown as a space)
#                         outfile the PNG
set terminal pngcairo size 1000,640 noenhanced font ",11"
set output outfile
set title "fsync time vs dirty 4 KiB pages (log-log): tracked, hammer, raw flush floor"
set logscale xy
set xlabel "dirty pages"
set ylabel "fsync time (us)"
set xtics (1, 16, 256, 2048)
set format y "%g"
set grid xtics ytics mytics
set key outside right center
n = words(files)
name(i) = system("echo " . word(titles, i) . " | tr _ ' '")
plot for [i=1:n] word(files, i) using 1:3 with linespoints lw 2 pt 7 dt 1 lc i \
	title name(i) . " hammer", \
     for [i=1:n] word(files, i) using 1:2 with linespoints lw 2 pt 5 dt 2 lc i \
	title name(i) . " tracked", \
     for [i=1:n] word(files, i) using 1:4 with lines lw 1 dt 3 lc i \
	title name(i) . " raw flush floor"
